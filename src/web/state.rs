//! The page's shared state. The GPU, the tokenizer and the loaded model live outside the
//! reactive graph (`StoredValue::new_local`, they are not `Send`); a task that needs the model
//! takes it out of its slot and puts it back when done, so no `RefCell` borrow spans an await.
//! Views see only snapshots, through signals.

use super::charts::ChartData;
use super::history::Entry;
use super::settings::{Caps, Settings};
use crate::bench::Lang;
use crate::engine::model::EngineLimits;
use crate::engine::Model;
use crate::gpu::Gpu;
use crate::model::Tokenizer;
use leptos::prelude::*;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

/// The models the page offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelChoice {
    Embedded,
    Qwen3_0_6b,
    Qwen3_1_7b,
}

impl ModelChoice {
    pub const ALL: [ModelChoice; 3] = [ModelChoice::Embedded, ModelChoice::Qwen3_0_6b, ModelChoice::Qwen3_1_7b];

    /// The name in the URL and in the results JSON (the CLI's `--synthetic` names).
    pub fn key(self) -> &'static str {
        match self {
            ModelChoice::Embedded => "embedded",
            ModelChoice::Qwen3_0_6b => "qwen3-0.6b",
            ModelChoice::Qwen3_1_7b => "qwen3-1.7b",
        }
    }

    pub fn from_key(key: &str) -> Option<ModelChoice> {
        ModelChoice::ALL.into_iter().find(|m| m.key() == key)
    }
}

/// A model on the GPU, with the engine sizes it was loaded for (a run may use less).
pub struct Loaded {
    pub model: Model,
    pub capacity: EngineLimits,
}

/// What the loaded model is, for the model card and the status line.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelInfo {
    pub choice: ModelChoice,
    pub layers: usize,
    pub hidden: usize,
    pub vocab: usize,
    pub weight_bytes: u64,
    pub kv_tokens: usize,
    pub caps: Caps,
}

/// The status line.
#[derive(Clone, Debug, PartialEq)]
pub enum Status {
    Starting,
    RequestingAdapter,
    LoadingTokenizer,
    /// Weights generated and uploaded so far, in percent.
    LoadingWeights(ModelChoice, u32),
    Ready,
    Error(String),
}

/// What the page is busy with; the buttons follow it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Idle,
    Loading,
    Running,
    Generating,
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
    pub adapter: RwSignal<Option<String>>,
    pub choice: RwSignal<ModelChoice>,
    pub model_info: RwSignal<Option<ModelInfo>>,
    pub phase: RwSignal<Phase>,
    pub settings: Settings,
    pub progress: RwSignal<Option<RunProgress>>,
    pub run_error: RwSignal<Option<String>>,
    /// What the charts show: the live run, or the run in the report.
    pub charts: RwSignal<ChartData>,
    /// The run in the report.
    pub shown: RwSignal<Option<Arc<Entry>>>,
    pub history: RwSignal<Vec<Arc<Entry>>>,
    /// Set when older runs had to go to make room in localStorage.
    pub history_dropped: RwSignal<bool>,
    pub slot: StoredValue<Rc<RefCell<Option<Loaded>>>, LocalStorage>,
    pub gpu: StoredValue<Option<Rc<Gpu>>, LocalStorage>,
    pub tokenizer: StoredValue<Option<Rc<Tokenizer>>, LocalStorage>,
    pub cancel: StoredValue<Rc<Cell<bool>>, LocalStorage>,
}

impl AppState {
    pub fn new(lang: Lang, choice: ModelChoice, history: Vec<Arc<Entry>>) -> AppState {
        AppState {
            lang: RwSignal::new(lang),
            status: RwSignal::new(Status::Starting),
            adapter: RwSignal::new(None),
            choice: RwSignal::new(choice),
            model_info: RwSignal::new(None),
            phase: RwSignal::new(Phase::Loading),
            settings: Settings::from_query(),
            progress: RwSignal::new(None),
            run_error: RwSignal::new(None),
            charts: RwSignal::new(ChartData::default()),
            shown: RwSignal::new(None),
            history: RwSignal::new(history),
            history_dropped: RwSignal::new(false),
            slot: StoredValue::new_local(Rc::new(RefCell::new(None))),
            gpu: StoredValue::new_local(None),
            tokenizer: StoredValue::new_local(None),
            cancel: StoredValue::new_local(Rc::new(Cell::new(false))),
        }
    }

    /// Takes the model out of its slot (None when absent or already taken).
    pub fn take_model(&self) -> Option<Loaded> {
        self.slot.with_value(|slot| slot.borrow_mut().take())
    }

    pub fn put_model(&self, loaded: Loaded) {
        self.slot.with_value(|slot| *slot.borrow_mut() = Some(loaded));
    }
}
