//! The model card (a preset, local files by picker or drag and drop, a URL or Hugging Face repo
//! id; download progress with cancel; the cached models) and the adapter card. File names,
//! URLs and error messages are shown as text nodes only.

use super::files;
use super::i18n::use_text;
use super::models::{self, preset_label};
use super::state::{AppState, Phase};
use crate::web::protocol::{LoadRequest, ModelChoice, ModelSource, Status};
use leptos::prelude::*;
use wasm_bindgen::JsCast;

fn mb(bytes: u64) -> String {
    if bytes >= 1_000_000_000 {
        format!("{:.2} GB", bytes as f64 / 1e9)
    } else {
        format!("{:.1} MB", bytes as f64 / 1e6)
    }
}

/// Loads picked or dropped files, or says why they cannot be a model (the loaded one stays).
fn load_files(state: AppState, picked: Vec<(String, web_sys::File)>) {
    if picked.is_empty() {
        return;
    }
    match files::store(picked) {
        Ok((store, _)) => models::load(state, LoadRequest::Local(store)),
        Err(e) => state.load_error.set(Some(e.to_string())),
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

#[component]
pub fn ModelPanel(state: AppState) -> impl IntoView {
    let t = use_text();
    let idle = move || state.phase.get() == Phase::Idle;
    // Without WebGPU no model can load (deleting a cached one still works).
    let can_load = move || idle() && state.no_webgpu.with(Option::is_none);
    let loading = move || match state.status.get() {
        Status::LoadingWeights(_, percent) => Some(percent),
        _ => None,
    };
    let dragging = RwSignal::new(false);
    // Picks a folder (the view macro has no spelling for this non-standard attribute).
    let folder_input = NodeRef::<leptos::html::Input>::new();
    Effect::new(move |_| {
        if let Some(input) = folder_input.get() {
            let _ = input.set_attribute("webkitdirectory", "");
        }
    });
    let url = RwSignal::new(match state.choice.get_untracked() {
        ModelSource::Remote { input } => input,
        _ => String::new(),
    });
    let on_pick = move |ev: leptos::ev::Event| {
        let Some(input) = ev.target().and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok()) else { return };
        let picked = files::from_input(&input);
        // The same files picked again must fire `change` again.
        input.set_value("");
        load_files(state, picked);
    };
    let on_drop = move |ev: web_sys::DragEvent| {
        ev.prevent_default();
        dragging.set(false);
        if !can_load() {
            return;
        }
        let (entries, plain) = files::drop_entries(&ev);
        wasm_bindgen_futures::spawn_local(async move {
            let picked = if entries.is_empty() {
                Ok(plain.into_iter().map(|f| (f.name(), f)).collect())
            } else {
                files::walk(entries).await
            };
            match picked {
                Ok(picked) => load_files(state, picked),
                Err(e) => state.load_error.set(Some(e.to_string())),
            }
        });
    };
    let load_url = move || {
        let input = url.get_untracked().trim().to_string();
        if !input.is_empty() {
            models::load(state, LoadRequest::Remote(input));
        }
    };
    let facts = move || {
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
    };
    let download = move || {
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
    };
    let cached = move || {
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
                        <span class="num muted">{format!("{} · {} {}", mb(c.bytes), c.files, if c.files == 1 { "file" } else { "files" })}</span>
                        <button class="small" disabled=move || !can_load() on:click=move |_| {
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
            <select
                data-testid="model"
                aria-labelledby="model-title"
                disabled=move || !can_load()
                on:change=move |ev| {
                    if let Some(choice) = ModelChoice::from_key(&event_target_value(&ev)) {
                        models::load(state, LoadRequest::Preset(choice));
                    }
                }
                prop:value=move || match state.choice.get() {
                    ModelSource::Preset(c) => c.key().to_string(),
                    _ => "other".to_string(),
                }
            >
                {ModelChoice::ALL
                    .into_iter()
                    .map(|c| view! { <option value=c.key()>{move || preset_label(c, t())}</option> })
                    .collect_view()}
                <option value="other" disabled=true>
                    {move || match state.choice.get() {
                        ModelSource::Preset(_) => t().model_other.to_string(),
                        other => other.key(),
                    }}
                </option>
            </select>
            <div class="drop" data-testid="drop">
                <span class="note">{move || t().drop_hint}</span>
                <div class="row">
                    <label class="button small" class:disabled=move || !can_load()>
                        {move || t().pick_folder}
                        <input
                            type="file"
                            class="hidden-input"
                            data-testid="pick-folder"
                            node_ref=folder_input
                            multiple=true
                            disabled=move || !can_load()
                            on:change=on_pick
                        />
                    </label>
                    <label class="button small" class:disabled=move || !can_load()>
                        {move || t().pick_files}
                        <input
                            type="file"
                            class="hidden-input"
                            data-testid="pick-files"
                            accept=".json,.safetensors"
                            multiple=true
                            disabled=move || !can_load()
                            on:change=on_pick
                        />
                    </label>
                </div>
            </div>
            <form class="row url-row" on:submit=move |ev| {
                ev.prevent_default();
                load_url();
            }>
                <input
                    data-testid="model-url"
                    placeholder="Qwen/Qwen3-0.6B · https://…/"
                    aria-label=move || t().model_url
                    autocomplete="off"
                    spellcheck="false"
                    prop:value=move || url.get()
                    on:input=move |ev| url.set(event_target_value(&ev))
                />
                <button class="small" type="submit" data-testid="model-url-load" disabled=move || !can_load()>
                    {move || t().load}
                </button>
            </form>
            <LinkConfirmation state=state />
            {download}
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
            <ErrorLine
                prefix=Signal::derive(move || t().load_failed)
                message=state.load_error.into()
                testid="model-error"
            />
            {facts}
            <Show when=move || state.cached.with(|c| !c.is_empty())>
                <h3>{move || t().cached_models}</h3>
                <ul class="cached" data-testid="cached">{cached}</ul>
            </Show>
            <p class="note">{move || t().model_note}</p>
        </section>
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
                format!("{} · {} · {} kernels", a.backend, a.device_type, a.kernel_family.name()),
            ));
            rows.push(("maxStorageBufferBindingSize", mb(a.max_storage_buffer_binding_size)));
            rows.push(("maxBufferSize", mb(a.max_buffer_size)));
            let features = if a.features.is_empty() { "–".to_string() } else { a.features.join(", ") };
            rows.push((t.adapter_features, features));
        }
        if let Some(ms) = state.timer_resolution_ms.get() {
            rows.push((t.timer_resolution, timer_text(ms, cross_origin_isolated())));
        }
        match roofline.get() {
            Some(Ok(r)) => {
                rows.push((t.roofline_copy, format!("{:.2} GB/s", r.copy_gb_s)));
                rows.push((t.roofline_read, format!("{:.2} GB/s", r.read_gb_s)));
                rows.push((t.roofline_fma, format!("{:.1} GFLOP/s", r.fma_gflop_s)));
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
                            let full = k == t().adapter_features;
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
pub fn timer_text(ms: f64, isolated: bool) -> String {
    let step = if ms < 1.0 { format!("{:.1} µs", ms * 1e3) } else { format!("{ms:.1} ms") };
    if isolated {
        format!("{step} (cross-origin isolated)")
    } else {
        step
    }
}
