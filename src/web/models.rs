//! Starting up (adapter, tokenizer) and loading a model: the embedded default, or random
//! weights with Qwen3-0.6B/1.7B shapes; plus the model card that picks one.

use super::i18n::{use_text, Text};
use super::settings::Caps;
use super::state::{AppState, Loaded, ModelChoice, ModelInfo, Phase, Status};
use crate::clock::now_s;
use crate::engine::{Model, ModelOptions};
use crate::gpu::Gpu;
use crate::model::synthetic::SyntheticModel;
use crate::model::{Qwen3Config, TensorProvider, Tokenizer};
use crate::{Error, Result};
use leptos::prelude::*;
use std::cell::Cell;
use std::rc::Rc;

/// Engine sizes a model is loaded for: room for the settings' largest max batch and max batched
/// tokens, so changing them needs no reload. The KV budget is the CLI's for real shapes and a
/// quarter of it for the tiny default (which needs little).
fn options(choice: ModelChoice) -> ModelOptions {
    let kv_budget_bytes = match choice {
        ModelChoice::Embedded => 128 << 20,
        _ => ModelOptions::default().kv_budget_bytes,
    };
    ModelOptions { max_seqs: 64, max_batched_tokens: 2048, kv_budget_bytes, ..ModelOptions::default() }
}

/// The adapter and the tokenizer once, then the chosen model.
pub fn start(state: AppState) {
    wasm_bindgen_futures::spawn_local(async move {
        let init = async {
            state.status.set(Status::RequestingAdapter);
            let gpu = Rc::new(Gpu::new().await?);
            let a = &gpu.adapter;
            state.adapter.set(Some(format!("{} ({}, {})", a.name, a.backend, a.device_type)));
            state.gpu.set_value(Some(gpu));
            state.status.set(Status::LoadingTokenizer);
            let tokenizer = Tokenizer::from_bytes(&super::browser::fetch_bytes("tokenizer.json").await?)?;
            state.tokenizer.set_value(Some(Rc::new(tokenizer)));
            Ok::<_, Error>(())
        };
        match init.await {
            Ok(()) => load(state, state.choice.get_untracked()),
            Err(e) => {
                state.status.set(Status::Error(e.to_string()));
                state.phase.set(Phase::Idle);
            }
        }
    });
}

/// Replaces the loaded model with `choice` (the old one's GPU memory is freed first).
pub fn load(state: AppState, choice: ModelChoice) {
    let Some(gpu) = state.gpu.get_value() else { return };
    drop(state.take_model());
    state.choice.set(choice);
    state.model_info.set(None);
    state.phase.set(Phase::Loading);
    state.status.set(Status::LoadingWeights(choice, 0));
    wasm_bindgen_futures::spawn_local(async move {
        let source = match choice {
            ModelChoice::Embedded => SyntheticModel::embedded_default(),
            other => SyntheticModel::new(Qwen3Config::preset(other.key()).expect("a known preset"), 0),
        };
        let source = Breathing { inner: source, last_yield_s: Cell::new(now_s()) };
        let mut shown = 0;
        let loaded = Model::load(gpu, &source, &options(choice), &mut |done, total| {
            let percent = (done * 100 / total.max(1)) as u32;
            if percent != shown {
                shown = percent;
                state.status.set(Status::LoadingWeights(choice, percent));
            }
        })
        .await;
        // Another choice may have started meanwhile; only the latest one is kept.
        if state.choice.get_untracked() != choice {
            return;
        }
        match loaded {
            Ok(model) => {
                let c = &model.cfg;
                let l = &model.limits;
                state.model_info.set(Some(ModelInfo {
                    choice,
                    layers: c.num_hidden_layers,
                    hidden: c.hidden_size,
                    vocab: c.vocab_size,
                    weight_bytes: model.weights.bytes,
                    kv_tokens: l.num_blocks * l.block_size,
                    caps: Caps {
                        max_batch: l.max_seqs,
                        max_batched_tokens: l.max_batched_tokens,
                        max_position: c.max_position_embeddings,
                    },
                }));
                let capacity = model.limits.clone();
                state.put_model(Loaded { model, capacity });
                state.status.set(Status::Ready);
            }
            Err(e) => state.status.set(Status::Error(e.to_string())),
        }
        state.phase.set(Phase::Idle);
    });
}

/// A model source that lets the page repaint while weights are generated: generating them is
/// pure CPU work with no await that yields, so every 50 ms this one waits for the event loop.
struct Breathing {
    inner: SyntheticModel,
    last_yield_s: Cell<f64>,
}

impl TensorProvider for Breathing {
    fn config(&self) -> &Qwen3Config {
        self.inner.config()
    }
    fn lm_head_name(&self) -> &str {
        self.inner.lm_head_name()
    }
    async fn rows_bf16(&self, name: &str, row_start: usize, rows: usize) -> Result<Vec<u16>> {
        if now_s() - self.last_yield_s.get() > 0.05 {
            gloo_timers::future::TimeoutFuture::new(0).await;
            self.last_yield_s.set(now_s());
        }
        self.inner.rows_bf16(name, row_start, rows).await
    }
    async fn f32(&self, name: &str) -> Result<Vec<f32>> {
        self.inner.f32(name).await
    }
    fn total_bytes(&self) -> u64 {
        self.inner.total_bytes()
    }
}

/// The model's name in the status line.
fn short_label(choice: ModelChoice, t: &Text) -> &'static str {
    match choice {
        ModelChoice::Embedded => t.model_embedded_short,
        ModelChoice::Qwen3_0_6b => t.model_06b_short,
        ModelChoice::Qwen3_1_7b => t.model_17b_short,
    }
}

fn choice_label(choice: ModelChoice, t: &Text) -> &'static str {
    match choice {
        ModelChoice::Embedded => t.model_embedded,
        ModelChoice::Qwen3_0_6b => t.model_06b,
        ModelChoice::Qwen3_1_7b => t.model_17b,
    }
}

/// The status line's text: adapter and model, or what is happening.
pub fn status_text(state: AppState, t: &Text) -> String {
    let adapter = state.adapter.get().unwrap_or_default();
    match state.status.get() {
        Status::Starting => t.starting.into(),
        Status::RequestingAdapter => t.requesting_adapter.into(),
        Status::LoadingTokenizer => format!("{adapter} · {}", t.loading_tokenizer),
        Status::LoadingWeights(choice, percent) => {
            format!("{adapter} · {} · {} {percent}%", choice_label(choice, t), t.generating_weights)
        }
        Status::Ready => match state.model_info.get() {
            Some(m) => format!(
                "{}: {}, {} ({} {}, {} {}, {} {}) {} {adapter}",
                t.ready,
                short_label(m.choice, t),
                t.random_weights,
                m.layers,
                t.layers,
                t.hidden,
                m.hidden,
                t.vocab,
                m.vocab,
                t.on
            ),
            None => t.ready.into(),
        },
        Status::Error(message) => format!("{}: {message}", t.error),
    }
}

/// The model card: pick a model, see its shape and what the engine can hold.
#[component]
pub fn ModelPanel(state: AppState) -> impl IntoView {
    let t = use_text();
    let loading = move || match state.status.get() {
        Status::LoadingWeights(_, percent) => Some(percent),
        _ => None,
    };
    let facts = move || {
        state.model_info.get().map(|m| {
            let t = t();
            let rows = [
                (t.layers, m.layers.to_string()),
                (t.hidden, m.hidden.to_string()),
                (t.vocab, m.vocab.to_string()),
                (t.weights, format!("{:.1} MB", m.weight_bytes as f64 / 1e6)),
                (t.kv_cache, format!("{} tok", m.kv_tokens)),
                (t.capacity, format!("{} / {}", m.caps.max_batch, m.caps.max_batched_tokens)),
            ];
            view! {
                <dl class="facts">
                    {rows
                        .into_iter()
                        .map(|(k, v)| view! { <div><dt>{k}</dt><dd>{v}</dd></div> })
                        .collect_view()}
                </dl>
            }
        })
    };
    view! {
        <section class="card" aria-labelledby="model-title">
            <div class="card-head">
                <h2 id="model-title">{move || t().model}</h2>
            </div>
            <select
                data-testid="model"
                aria-labelledby="model-title"
                disabled=move || state.phase.get() != Phase::Idle
                on:change=move |ev| {
                    if let Some(choice) = ModelChoice::from_key(&event_target_value(&ev)) {
                        load(state, choice);
                    }
                }
                prop:value=move || state.choice.get().key()
            >
                {ModelChoice::ALL
                    .into_iter()
                    .map(|c| {
                        view! {
                            <option value=c.key() selected=move || state.choice.get() == c>
                                {move || choice_label(c, t())}
                            </option>
                        }
                    })
                    .collect_view()}
            </select>
            {move || {
                loading()
                    .map(|percent| {
                        view! {
                            <div class="loading">
                                <progress max="100" value=percent></progress>
                                <span class="num">{percent}"%"</span>
                            </div>
                        }
                    })
            }}
            {facts}
            <p class="note">{move || t().random_weights_note}</p>
        </section>
    }
}
