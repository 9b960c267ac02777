//! Ctrl-C, for every command that runs a benchmark.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokenmeter::bench::run::target::Listener;

/// Ctrl-C during `bench`: the first stops the run (the session's `cancel`, and the remote
/// client's own flag, since a server run has no engine steps to notice it at), so that what
/// was measured is written; a second quits at once.
pub(crate) struct Interrupt {
    pub flag: Arc<AtomicBool>,
    pub cancel: Rc<Cell<bool>>,
}

impl Interrupt {
    pub(crate) fn on_ctrl_c() -> Interrupt {
        let flag = Arc::new(AtomicBool::new(false));
        #[cfg(unix)]
        {
            let (ready_tx, ready_rx) = std::sync::mpsc::channel();
            let set = flag.clone();
            std::thread::spawn(move || {
                let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                    return;
                };
                runtime.block_on(async move {
                    use tokio::signal::unix::{signal, SignalKind};
                    let Ok(mut ctrl_c) = signal(SignalKind::interrupt()) else { return };
                    let _ = ready_tx.send(());
                    ctrl_c.recv().await;
                    set.store(true, Ordering::SeqCst);
                    eprintln!("\ninterrupted: stopping and keeping what was measured (Ctrl-C again quits now)");
                    ctrl_c.recv().await;
                    std::process::exit(130);
                });
            });
            // The handler is in place before the run starts.
            let _ = ready_rx.recv_timeout(std::time::Duration::from_secs(2));
        }
        Interrupt { flag, cancel: Rc::new(Cell::new(false)) }
    }

    pub(crate) fn fired(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// `inner`, which also passes a Ctrl-C on to the session (the engine's driver reads
    /// `cancel` after every step).
    pub(crate) fn listener(&self, inner: Listener) -> Listener {
        let (flag, cancel) = (self.flag.clone(), self.cancel.clone());
        Rc::new(move |event| {
            if flag.load(Ordering::SeqCst) {
                cancel.set(true);
            }
            inner(event)
        })
    }
}
