//! The page's shared state: signals the views read and write, and the engine worker's link. The
//! engine itself (device, model, tokenizers) lives in the worker (`web::worker`); views see only
//! snapshots of it, through signals.

use super::history::Entry;
use super::search::SearchView;
use super::settings::Settings;
use super::sweep::SweepView;
use super::target::TargetSettings;
use crate::bench::Lang;
use crate::gpu::kernels::KernelSwitches;
use crate::web::protocol::{ChartData, DownloadProgress, LinkSwitches, ModelInfo, ModelSource, NoWebGpu, Status};
use crate::web::sources::CachedModel;
use leptos::prelude::*;
use std::rc::Rc;
use std::sync::Arc;

/// A model named by the page's link (`?model=<URL or repo>`), not yet in the cache: nothing is
/// downloaded until the user says yes.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingLink {
    /// As the link gave it (shown as text).
    pub input: String,
    /// The folder URL the files would come from (shown as text).
    pub base: String,
    /// The weights' size, when the server says it before the download.
    pub bytes: Option<u64>,
}

/// What the page is busy with; the buttons follow it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Idle,
    Loading,
    Running,
    Generating,
    /// The roofline probe (adapter card).
    Measuring,
    /// *Check this GPU* (adapter card).
    Verifying,
    /// The Plan card's simulation (in the engine worker, which nothing else then shares).
    Planning,
}

/// Progress of a benchmark run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunProgress {
    Baseline,
    Requests { finished: usize, total: usize },
}

#[derive(Clone, Copy)]
pub struct AppState {
    pub lang: RwSignal<Lang>,
    pub status: RwSignal<Status>,
    pub adapter: RwSignal<Option<crate::gpu::context::AdapterSummary>>,
    /// Why the engine has no device, when start-up found no WebGPU (the engine target is off).
    pub no_webgpu: RwSignal<Option<NoWebGpu>>,
    /// The model loaded (or being loaded).
    pub choice: RwSignal<ModelSource>,
    /// Why the last model load failed (the previous model stays loaded).
    pub load_error: RwSignal<Option<String>>,
    pub download: RwSignal<Option<DownloadProgress>>,
    /// A model named by the link, waiting for the user's yes before any download.
    pub pending_link: RwSignal<Option<PendingLink>>,
    pub cached: RwSignal<Vec<CachedModel>>,
    /// performance.now()'s step in ms, measured at start.
    pub timer_resolution_ms: RwSignal<Option<f64>>,
    pub model_info: RwSignal<Option<ModelInfo>>,
    /// Every load of this visit, by the model's name: the model card compares a cold load with a
    /// cached one (`web::page::ready`).
    pub loads: RwSignal<Vec<(String, crate::bench::record::ready::TimeToReady)>>,
    pub phase: RwSignal<Phase>,
    pub settings: Settings,
    /// Where runs send their requests: this engine or a server.
    pub target: TargetSettings,
    /// A dataset file instead of drawn lengths (the settings card's picker).
    pub dataset: super::dataset::DatasetState,
    pub progress: RwSignal<Option<RunProgress>>,
    pub run_error: RwSignal<Option<String>>,
    /// What the charts show: the live run, or the run in the report.
    pub charts: RwSignal<ChartData>,
    /// The rate sweep in progress or last done (`None`: the last run had one rate).
    pub sweep: RwSignal<Option<SweepView>>,
    /// The search for the highest rate in progress or last done (`None`: the last run was not one).
    pub search: RwSignal<Option<SearchView>>,
    /// The run in the report.
    pub shown: RwSignal<Option<Arc<Entry>>>,
    pub history: RwSignal<Vec<Arc<Entry>>>,
    /// Set when older runs had to go to make room in localStorage.
    pub history_dropped: RwSignal<bool>,
    /// The engine switches of the link (`?kernels=`, …), parsed once at start and sent to the
    /// engine worker: every model it loads gets them.
    pub switches: LinkSwitches,
    /// The roofline probe's result on the adapter card (None: not measured; Err: why it failed).
    pub roofline: RwSignal<Option<std::result::Result<crate::gpu::roofline::Roofline, String>>>,
    /// *Check this GPU*'s outcome on the loaded model (`None`: not checked since it loaded).
    pub verification: RwSignal<Option<std::result::Result<crate::engine::verify::Verification, String>>>,
    /// The playground's answer as it streams.
    pub playground: Generation,
    /// The Plan card's last answer from the worker (None: none asked for, or it is being computed).
    pub planned: RwSignal<Option<std::result::Result<crate::planner::capacity::Capacity, String>>>,
    /// The engine worker, and the command in progress's view (see [`super::link`]).
    pub engine: StoredValue<Option<Rc<super::link::Link>>, LocalStorage>,
    /// The run in progress: what the page saw during each rate done so far (the main thread's
    /// long tasks, the browser's conditions), and the watches of the current one.
    pub watch: StoredValue<RunWatch, LocalStorage>,
}

/// The playground's output: the answer so far, its pieces with their gaps, the timing line.
#[derive(Clone, Copy)]
pub struct Generation {
    pub answer: RwSignal<String>,
    pub pieces: RwSignal<Vec<Piece>>,
    pub timing: RwSignal<String>,
}

/// One piece of the answer as it appeared: its text and the time since the previous piece.
#[derive(Clone, Debug, PartialEq)]
pub struct Piece {
    pub text: String,
    pub gap_ms: f64,
}

/// See [`AppState::watch`].
#[derive(Default)]
pub struct RunWatch {
    pub long_tasks: Option<crate::web::browser::LongTaskWatch>,
    pub conditions: Option<crate::web::browser::ConditionWatch>,
    /// What each rate's run saw, in the order the rates ran.
    pub done: Vec<RateSeen>,
}

/// What the page saw during one rate's run (each `None` where the browser could not say).
pub struct RateSeen {
    pub rate: f64,
    pub long_tasks: Option<crate::bench::LongTasks>,
    pub conditions: Option<crate::bench::record::conditions::Conditions>,
}

/// The link's engine switches (see [`LinkSwitches`]), from the page's query string; a value that
/// does not parse leaves the defaults and says which key was wrong.
fn switches_from_query() -> (LinkSwitches, Option<String>) {
    let query = crate::web::browser::query_param;
    let parsed = KernelSwitches::from_query(query).and_then(|kernels| {
        let overlap = query("overlap")
            .map(|v| crate::gpu::kernels::parse_on_off(&v).map_err(|e| format!("?overlap=: {e}")))
            .transpose()?;
        Ok(LinkSwitches { kernels, overlap })
    });
    match parsed {
        Ok(s) => (s, None),
        Err(e) => (LinkSwitches::default(), Some(format!("the link's engine switches were ignored: {e}"))),
    }
}

impl AppState {
    pub fn new(lang: Lang, choice: ModelSource, history: Vec<Arc<Entry>>) -> AppState {
        let (switches, switch_error) = switches_from_query();
        AppState {
            lang: RwSignal::new(lang),
            status: RwSignal::new(Status::Starting),
            adapter: RwSignal::new(None),
            no_webgpu: RwSignal::new(None),
            choice: RwSignal::new(choice),
            load_error: RwSignal::new(switch_error),
            download: RwSignal::new(None),
            pending_link: RwSignal::new(None),
            cached: RwSignal::new(Vec::new()),
            timer_resolution_ms: RwSignal::new(None),
            model_info: RwSignal::new(None),
            loads: RwSignal::new(Vec::new()),
            phase: RwSignal::new(Phase::Loading),
            settings: Settings::from_query(),
            target: TargetSettings::from_query(),
            dataset: super::dataset::DatasetState::new(),
            progress: RwSignal::new(None),
            run_error: RwSignal::new(None),
            charts: RwSignal::new(ChartData::default()),
            sweep: RwSignal::new(None),
            search: RwSignal::new(None),
            shown: RwSignal::new(None),
            history: RwSignal::new(history),
            history_dropped: RwSignal::new(false),
            switches,
            roofline: RwSignal::new(None),
            verification: RwSignal::new(None),
            playground: Generation {
                answer: RwSignal::new(String::new()),
                pieces: RwSignal::new(Vec::new()),
                timing: RwSignal::new(String::new()),
            },
            planned: RwSignal::new(None),
            engine: StoredValue::new_local(None),
            watch: StoredValue::new_local(RunWatch::default()),
        }
    }
}
