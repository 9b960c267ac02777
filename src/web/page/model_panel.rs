//! The model card (a preset, local files by picker or drag and drop, a URL or Hugging Face repo
//! id; download progress with cancel; the cached models) and the adapter card. File names,
//! URLs and error messages are shown as text nodes only.

use super::i18n::{use_text, Text};
use super::model_sources::{self, FilePickers, PresetSelect, UrlForm};
use super::models;
use super::state::{AppState, Phase};
use crate::engine::trial::{Trial, TrialWords};
use crate::web::protocol::{LoadRequest, ModelSource, Status};
use leptos::prelude::*;

fn mb(bytes: u64) -> String {
    if bytes >= 1_000_000_000 {
        format!("{:.2} GB", bytes as f64 / 1e9)
    } else {
        format!("{:.1} MB", bytes as f64 / 1e6)
    }
}

/// The question a model named by the page's link asks before anything is downloaded: the URL
/// and the size as text nodes, never markup.
#[component]
fn LinkConfirmation(state: AppState) -> impl IntoView {
    let t = use_text();
    move || {
        state.pending_link.get().map(|pending| {
            let size = match pending.bytes {
                Some(bytes) => mb(bytes),
                None => t().link_model_size_unknown.to_string(),
            };
            let named = if pending.input == pending.base {
                pending.base.clone()
            } else {
                format!("{} ({})", pending.input, pending.base)
            };
            view! {
                <div class="confirm" role="alertdialog" aria-labelledby="link-model-question" data-testid="link-confirm">
                    <p id="link-model-question">{move || t().link_model_question}</p>
                    <p><code class="url" data-testid="link-confirm-url">{named}</code></p>
                    <p class="note">{move || t().link_model_size} " " {size}</p>
                    <div class="row">
                        <button class="primary small" data-testid="link-confirm-yes" on:click=move |_| models::answer_link(state, true)>
                            {move || t().link_model_download}
                        </button>
                        <button class="ghost small" data-testid="link-confirm-no" on:click=move |_| models::answer_link(state, false)>
                            {move || t().link_model_decline}
                        </button>
                    </div>
                </div>
            }
        })
    }
}

/// A line of error text (never markup).
#[component]
pub fn ErrorLine(
    /// Shown before the message.
    prefix: Signal<&'static str>,
    message: Signal<Option<String>>,
    testid: &'static str,
) -> impl IntoView {
    move || {
        message.get().map(|m| {
            view! {
                <p class="error" role="alert" data-testid=testid>
                    {move || prefix.get()}
                    ": "
                    {m}
                </p>
            }
        })
    }
}

/// The model card: the ways to name a model ([`super::model_sources`]), the link's question,
/// progress, the loaded model's facts and the cached models. Files dropped anywhere on the card
/// load.
#[component]
pub fn ModelPanel(state: AppState) -> impl IntoView {
    let t = use_text();
    // Without WebGPU no model can load (deleting a cached one still works).
    let can_load = Signal::derive(move || state.phase.get() == Phase::Idle && state.no_webgpu.with(Option::is_none));
    let dragging = RwSignal::new(false);
    let on_drop = move |ev: web_sys::DragEvent| {
        ev.prevent_default();
        dragging.set(false);
        if can_load.get_untracked() {
            model_sources::load_dropped(state, &ev);
        }
    };
    view! {
        <section
            class="card"
            class:dragging=move || dragging.get()
            aria-labelledby="model-title"
            data-testid="model-card"
            on:dragover=move |ev: web_sys::DragEvent| {
                ev.prevent_default();
                dragging.set(true);
            }
            on:dragleave=move |_| dragging.set(false)
            on:drop=on_drop
        >
            <div class="card-head">
                <h2 id="model-title">{move || t().model}</h2>
            </div>
            <PresetSelect state=state can_load=can_load />
            <FilePickers state=state can_load=can_load />
            <UrlForm state=state can_load=can_load />
            <LinkConfirmation state=state />
            <DownloadProgress state=state />
            <LoadingProgress state=state />
            <ErrorLine
                prefix=Signal::derive(move || t().load_failed)
                message=state.load_error.into()
                testid="model-error"
            />
            <ModelFacts state=state />
            <super::ready::TimeToReadyView state=state />
            <Show when=move || state.cached.with(|c| !c.is_empty())>
                <h3>{move || t().cached_models}</h3>
                <ul class="cached" data-testid="cached">
                    <CachedModels state=state can_load=can_load />
                </ul>
            </Show>
            <p class="note">{move || t().model_note}</p>
        </section>
    }
}

/// A download's progress, with its cancel button.
#[component]
fn DownloadProgress(state: AppState) -> impl IntoView {
    let t = use_text();
    move || {
        state.download.get().map(|p| {
            view! {
                <div class="loading" data-testid="download">
                    <progress max="1" value=p.fraction()></progress>
                    <span class="num">{p.text()}</span>
                    <button class="small ghost" data-testid="download-cancel" on:click=move |_| models::cancel_download(state)>
                        {move || t().cancel}
                    </button>
                </div>
            }
        })
    }
}

/// The kernel trial's choices in the page's language ([`Trial::describe`]).
fn trial_text(trial: &Trial, t: &Text) -> String {
    trial.describe(&TrialWords {
        prefill_attention: t.trial_prefill_attention,
        subgroups: t.trial_subgroups,
        matmul_tile: t.trial_matmul_tile,
        gemv_m1: t.trial_gemv_m1,
        gemv_rows4: t.trial_gemv_rows4,
        tile_prefetch: t.trial_tile_prefetch,
        tiled: t.trial_tiled,
        untiled: t.trial_untiled,
        on: t.trial_on,
        off: t.trial_off,
        forced: t.trial_forced,
        only_choice: t.trial_only_choice,
        cached: t.trial_cached,
        cut_short: t.trial_cut_short,
    })
}

/// The weights' upload to the GPU, in percent.
#[component]
fn LoadingProgress(state: AppState) -> impl IntoView {
    move || match state.status.get() {
        Status::LoadingWeights(_, percent) => Some(view! {
            <div class="loading">
                <progress max="100" value=percent></progress>
                <span class="num">{percent}"%"</span>
            </div>
        }),
        _ => None,
    }
}

/// The loaded model's shape, weights, KV cache and batch capacity.
#[component]
fn ModelFacts(state: AppState) -> impl IntoView {
    let t = use_text();
    move || {
        state.model_info.get().map(|m| {
            let t = t();
            let rows = [
                (t.layers, m.layers.to_string()),
                (t.hidden, m.hidden.to_string()),
                (t.vocab, m.vocab.to_string()),
                (t.weights, mb(m.weight_bytes)),
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
    }
}

/// The models in the browser's cache, each with Load and Delete (the current one marked).
#[component]
fn CachedModels(
    state: AppState,
    /// Whether a model may load now (deleting needs only an idle page).
    can_load: Signal<bool>,
) -> impl IntoView {
    let t = use_text();
    let idle = move || state.phase.get() == Phase::Idle;
    move || {
        state
            .cached
            .get()
            .into_iter()
            .map(|c| {
                let (base, delete_base) = (c.base.clone(), c.base.clone());
                let current = state.choice.with(|s| matches!(s, ModelSource::Remote { input } if crate::web::sources::remote_base(input).ok().and_then(|b| crate::web::cache::absolute(&b, &crate::web::cache::page_url()).ok()) == Some(c.base.clone())));
                view! {
                    <li class="cached-model" class:current=current>
                        <span class="name">{c.label.clone()}</span>
                        <span class="num muted">{move || format!("{} · {}", mb(c.bytes), t().cached_files.replace("{n}", &c.files.to_string()).replace("{s}", if c.files == 1 { "" } else { "s" }))}</span>
                        <button class="small" disabled=move || !can_load.get() on:click=move |_| {
                            models::load(state, LoadRequest::Remote(base.clone()))
                        }>{move || t().load}</button>
                        <button class="small ghost" data-testid="cached-delete" disabled=move || !idle() on:click=move |_| {
                            let base = delete_base.clone();
                            wasm_bindgen_futures::spawn_local(async move {
                                if let Err(e) = crate::web::cache::delete(&base).await {
                                    state.load_error.set(Some(e.to_string()));
                                }
                                models::refresh_cached(state);
                            });
                        }>{move || t().delete}</button>
                    </li>
                }
            })
            .collect_view()
    }
}

/// What the page runs on: the adapter's name, backend, limits and features, the timer, and (on
/// request) the adapter's roofline: copy bandwidth and FMA rate from the same probe as
/// `tokenmeter roofline`.
#[component]
pub fn AdapterPanel(state: AppState) -> impl IntoView {
    let t = use_text();
    // None: not measured; Some(Err): the probe failed (shown as text). Measured in the engine
    // worker, on its device.
    let roofline = state.roofline;
    let measuring = move || state.phase.get() == Phase::Measuring;
    let measure = move |_| {
        let Some(link) = super::link::get(state) else { return };
        state.phase.set(Phase::Measuring);
        link.send(&crate::web::protocol::ToEngine::Roofline, &[]);
    };
    let verifying = move || state.phase.get() == Phase::Verifying;
    let check = move |_| {
        let Some(link) = super::link::get(state) else { return };
        state.phase.set(Phase::Verifying);
        link.send(&crate::web::protocol::ToEngine::Verify, &[]);
    };
    // The outcome's line, and each failed check (plain text: it names kernels and numbers).
    let verified = move || {
        state.verification.get().map(|outcome| match outcome {
            Ok(v) => {
                let failed: Vec<String> =
                    v.checks.iter().filter(|c| !c.passed).map(|c| format!("{}: {}", c.what, c.worst)).collect();
                let class = if v.passed() { "note ok" } else { "error" };
                view! {
                    <p class=class data-testid="verify-outcome" data-passed=v.passed().to_string()>
                        {format!("{} ({})", v.line(), v.kernel_path)}
                    </p>
                    <ul class="note">{failed.into_iter().map(|f| view! { <li>{f}</li> }).collect_view()}</ul>
                }
                .into_any()
            }
            Err(e) => view! {
                <p class="error" role="alert" data-testid="verify-outcome" data-passed="false">{e}</p>
            }
            .into_any(),
        })
    };
    let rows = move || {
        let t = t();
        let mut rows = Vec::new();
        if let Some(a) = state.adapter.get() {
            let name = if a.name.is_empty() { "–".to_string() } else { a.name.clone() };
            rows.push((t.adapter_name, name));
            rows.push((
                t.adapter_backend,
                format!(
                    "{} · {} · {}",
                    a.backend,
                    a.device_type,
                    t.kernel_family.replace("{family}", a.kernel_family.name())
                ),
            ));
            rows.push(("maxStorageBufferBindingSize", mb(a.max_storage_buffer_binding_size)));
            rows.push(("maxBufferSize", mb(a.max_buffer_size)));
            let features = if a.features.is_empty() { "–".to_string() } else { a.features.join(", ") };
            rows.push((t.adapter_features, features));
        }
        if let Some(trial) = state.model_info.get().and_then(|m| m.kernel_trial) {
            rows.push((t.kernel_trial, trial_text(&trial, t)));
        }
        if let Some(ms) = state.timer_resolution_ms.get() {
            rows.push((t.timer_resolution, timer_text(ms, cross_origin_isolated(), t)));
        }
        match roofline.get() {
            Some(Ok(r)) => {
                rows.push((t.roofline_copy, format!("{:.2} GB/s", r.copy_gb_s)));
                rows.push((t.roofline_read, format!("{:.2} GB/s", r.read_gb_s)));
                rows.push((t.roofline_fma, format!("{:.1} GFLOP/s", r.fma_gflop_s)));
                rows.push((t.roofline_dispatch, format!("{:.1} µs", r.dispatch_us)));
            }
            Some(Err(e)) => rows.push((t.roofline_copy, e)),
            None => {}
        }
        rows
    };
    view! {
        <section class="card" aria-labelledby="adapter-title" data-testid="adapter">
            <div class="card-head">
                <h2 id="adapter-title">{move || t().adapter}</h2>
                <button
                    class="small ghost"
                    data-testid="roofline-measure"
                    disabled=move || state.phase.get() != Phase::Idle || state.adapter.get().is_none()
                    on:click=measure
                >
                    {move || if measuring() { t().roofline_measuring } else { t().roofline_measure }}
                </button>
                <button
                    class="small ghost"
                    data-testid="verify-gpu"
                    title=move || t().verify_gpu_title
                    disabled=move || state.phase.get() != Phase::Idle || state.model_info.get().is_none()
                    on:click=check
                >
                    {move || if verifying() { t().verify_gpu_running } else { t().verify_gpu }}
                </button>
            </div>
            <dl class="facts wide">
                {move || {
                    rows()
                        .into_iter()
                        .map(|(k, v)| {
                            let full = k == t().adapter_features || k == t().kernel_trial;
                            view! {
                                <div class:full=full>
                                    <dt>{k}</dt>
                                    <dd>{v}</dd>
                                </div>
                            }
                        })
                        .collect_view()
                }}
            </dl>
            {verified}
        </section>
    }
}

/// Whether the page is cross-origin isolated (COOP/COEP), which gives `performance.now()` its
/// finest step.
pub fn cross_origin_isolated() -> bool {
    web_sys::window()
        .and_then(|w| js_sys::Reflect::get(&w, &"crossOriginIsolated".into()).ok())
        .is_some_and(|v| v.is_truthy())
}

/// "5.0 µs (cross-origin isolated)" / "100.0 µs".
pub fn timer_text(ms: f64, isolated: bool, t: &Text) -> String {
    let step = if ms < 1.0 { format!("{:.1} µs", ms * 1e3) } else { format!("{ms:.1} ms") };
    if isolated {
        format!("{step} ({})", t.cross_origin_isolated)
    } else {
        step
    }
}
