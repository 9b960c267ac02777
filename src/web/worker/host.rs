//! The engine's side: what a run, a load or a generation works with in the engine worker, outside
//! any reactive graph (none of it is `Send`).

use crate::bench::record::ready::TimeToReady;
use crate::engine::forward::EngineLimits;
use crate::engine::ForwardPass;
use crate::gpu::Gpu;
use crate::model::Tokenizer;
use crate::web::protocol::{LinkSwitches, LoadRequest, Manifest};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// A model on the GPU, with the engine sizes it was loaded for (a run may use less).
pub struct LoadedModel {
    pub model: ForwardPass,
    pub capacity: EngineLimits,
}

/// The engine's side. The loaders fill it; the run service and the playground borrow the model
/// from it. A task that needs the model takes it out of its slot and puts it back when done, so no
/// `RefCell` borrow spans an await.
pub struct Host {
    model: RefCell<Option<LoadedModel>>,
    gpu: RefCell<Option<Rc<Gpu>>>,
    /// The loaded model's own tokenizer, if it has one.
    tokenizer: RefCell<Option<Rc<Tokenizer>>>,
    default_tokenizer: RefCell<Option<Rc<Tokenizer>>>,
    /// How the loaded model was loaded, to load it again.
    loaded_request: RefCell<Option<LoadRequest>>,
    /// Aborts the download in progress.
    abort: RefCell<Option<web_sys::AbortController>>,
    /// Set by Cancel; the run in progress stops at its next step.
    cancel: Rc<Cell<bool>>,
    /// The engine switches of the page's link: every model loaded gets them.
    switches: Cell<LinkSwitches>,
    /// The page's URL, which relative URLs (the page's tokenizer, a model folder) are against.
    page_url: RefCell<String>,
    /// The model cache's record, as the page last sent it or a download changed it.
    manifest: RefCell<Manifest>,
    /// The loaded model's load, phase by phase: what a run on it records.
    time_to_ready: RefCell<Option<TimeToReady>>,
    /// How the loaded model's kernels were chosen (`engine::trial`): what an experiment's B adopts.
    model_trial: RefCell<Option<crate::engine::trial::Trial>>,
}

impl Default for Host {
    fn default() -> Host {
        Host::new()
    }
}

impl Host {
    pub fn new() -> Host {
        Host {
            model: RefCell::new(None),
            gpu: RefCell::new(None),
            tokenizer: RefCell::new(None),
            default_tokenizer: RefCell::new(None),
            loaded_request: RefCell::new(None),
            abort: RefCell::new(None),
            cancel: Rc::new(Cell::new(false)),
            switches: Cell::new(LinkSwitches::default()),
            page_url: RefCell::new(String::new()),
            manifest: RefCell::new(Default::default()),
            time_to_ready: RefCell::new(None),
            model_trial: RefCell::new(None),
        }
    }

    /// The page's link and URL, sent at start.
    pub fn set_page(&self, switches: LinkSwitches, page_url: String) {
        self.switches.set(switches);
        *self.page_url.borrow_mut() = page_url;
    }

    pub fn switches(&self) -> LinkSwitches {
        self.switches.get()
    }

    /// `url` made absolute against the page's URL.
    pub fn page_relative(&self, url: &str) -> crate::Result<String> {
        crate::web::cache::absolute(url, &self.page_url.borrow())
    }

    pub fn manifest(&self) -> Manifest {
        self.manifest.borrow().clone()
    }

    pub fn set_manifest(&self, manifest: Manifest) {
        *self.manifest.borrow_mut() = manifest;
    }

    /// The loaded model's load ([`TimeToReady`]), for a run's record.
    pub fn time_to_ready(&self) -> Option<TimeToReady> {
        self.time_to_ready.borrow().clone()
    }

    pub fn set_time_to_ready(&self, ready: Option<TimeToReady>) {
        *self.time_to_ready.borrow_mut() = ready;
    }

    pub fn model_trial(&self) -> Option<crate::engine::trial::Trial> {
        self.model_trial.borrow().clone()
    }

    pub fn set_model_trial(&self, trial: Option<crate::engine::trial::Trial>) {
        *self.model_trial.borrow_mut() = trial;
    }

    /// Takes the model out of its slot (None when absent or already taken).
    pub fn take_model(&self) -> Option<LoadedModel> {
        self.model.borrow_mut().take()
    }

    pub fn put_model(&self, loaded: LoadedModel) {
        *self.model.borrow_mut() = Some(loaded);
    }

    pub fn gpu(&self) -> Option<Rc<Gpu>> {
        self.gpu.borrow().clone()
    }

    pub fn set_gpu(&self, gpu: Option<Rc<Gpu>>) {
        *self.gpu.borrow_mut() = gpu;
    }

    /// The tokenizer runs use: the model's own, else the page's Qwen3 one.
    pub fn tokenizer(&self) -> Option<Rc<Tokenizer>> {
        self.tokenizer.borrow().clone().or_else(|| self.default_tokenizer())
    }

    /// What [`Host::tokenizer`] is, for messages and records.
    pub fn tokenizer_name(&self) -> &'static str {
        if self.tokenizer.borrow().is_some() {
            "the model's tokenizer.json"
        } else {
            "the page's Qwen3 tokenizer.json"
        }
    }

    /// The model's own tokenizer, or `None` for the page's default.
    pub fn set_model_tokenizer(&self, tokenizer: Option<Rc<Tokenizer>>) {
        *self.tokenizer.borrow_mut() = tokenizer;
    }

    pub fn default_tokenizer(&self) -> Option<Rc<Tokenizer>> {
        self.default_tokenizer.borrow().clone()
    }

    pub fn set_default_tokenizer(&self, tokenizer: Rc<Tokenizer>) {
        *self.default_tokenizer.borrow_mut() = Some(tokenizer);
    }

    pub fn loaded_request(&self) -> Option<LoadRequest> {
        self.loaded_request.borrow().clone()
    }

    pub fn set_loaded_request(&self, request: Option<LoadRequest>) {
        *self.loaded_request.borrow_mut() = request;
    }

    pub fn abort(&self) -> Option<web_sys::AbortController> {
        self.abort.borrow().clone()
    }

    pub fn set_abort(&self, abort: Option<web_sys::AbortController>) {
        *self.abort.borrow_mut() = abort;
    }

    /// When the device was lost or reported an error: drops it and its model (the next load opens
    /// a new device) and says why.
    pub fn forget_faulty_gpu(&self) -> Option<String> {
        let fault = self.gpu()?.fault()?;
        drop(self.take_model());
        self.set_gpu(None);
        Some(fault.to_string())
    }

    /// The run's cancel flag (shared with the session).
    pub fn cancel_flag(&self) -> Rc<Cell<bool>> {
        self.cancel.clone()
    }
}
