//! The page (wasm only). For now a minimal one: the embedded default model — the real Qwen3
//! tokenizer on a small random-weight Qwen3 generated from a seed — on the browser's WebGPU
//! adapter, answering a typed prompt token by token. All text is rendered as text, never HTML.

use crate::engine::{generate_greedy, Engine, Model, ModelOptions};
use crate::gpu::Gpu;
use crate::model::synthetic::SyntheticModel;
use crate::model::Tokenizer;
use crate::{Error, Result};
use leptos::prelude::*;
use std::cell::RefCell;
use std::rc::Rc;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

pub fn start() {
    console_error_panic_hook::set_once();
    leptos::mount::mount_to_body(App);
}

struct Loaded {
    engine: Engine,
    tokenizer: Tokenizer,
}

/// Fetches a file served next to the page.
pub async fn fetch_bytes(url: &str) -> Result<Vec<u8>> {
    let window = web_sys::window().ok_or_else(|| Error::Invalid("no window".into()))?;
    let io = |e: wasm_bindgen::JsValue| Error::Io { path: url.into(), message: format!("{e:?}") };
    let response: web_sys::Response = JsFuture::from(window.fetch_with_str(url)).await.map_err(io)?.unchecked_into();
    if !response.ok() {
        return Err(Error::Io { path: url.into(), message: format!("HTTP {}", response.status()) });
    }
    let buffer = JsFuture::from(response.array_buffer().map_err(io)?).await.map_err(io)?;
    Ok(js_sys::Uint8Array::new(&buffer).to_vec())
}

async fn load_default(set_status: WriteSignal<String>) -> Result<Loaded> {
    set_status.set("Requesting a WebGPU adapter…".into());
    let gpu = Rc::new(Gpu::new().await?);
    let adapter = format!("{} ({}, {})", gpu.adapter.name, gpu.adapter.backend, gpu.adapter.device_type);
    set_status.set(format!("Adapter: {adapter}. Loading the tokenizer…"));
    let tokenizer = Tokenizer::from_bytes(&fetch_bytes("tokenizer.json").await?)?;
    set_status.set(format!("Adapter: {adapter}. Generating the embedded model's weights…"));
    let src = SyntheticModel::embedded_default();
    let model = Model::load(gpu, &src, &ModelOptions::default(), &mut |_, _| {}).await?;
    let c = &model.cfg;
    set_status.set(format!(
        "Ready: embedded default (Qwen3 shape, random weights: {} layers, hidden {}, vocab {}) on {adapter}",
        c.num_hidden_layers, c.hidden_size, c.vocab_size
    ));
    Ok(Loaded { engine: Engine::new(model), tokenizer })
}

#[component]
fn App() -> impl IntoView {
    let (status, set_status) = signal(String::from("Starting…"));
    let (ready, set_ready) = signal(false);
    let (busy, set_busy) = signal(false);
    let (prompt, set_prompt) = signal(String::from("Why is the sky blue?"));
    let (answer, set_answer) = signal(String::new());
    let (timing, set_timing) = signal(String::new());
    let engine: StoredValue<Rc<RefCell<Option<Loaded>>>, LocalStorage> =
        StoredValue::new_local(Rc::new(RefCell::new(None)));

    wasm_bindgen_futures::spawn_local(async move {
        match load_default(set_status).await {
            Ok(loaded) => {
                *engine.get_value().borrow_mut() = Some(loaded);
                set_ready.set(true);
            }
            Err(e) => set_status.set(format!("Error: {e}")),
        }
    });

    let generate = move |_| {
        let slot = engine.get_value();
        let text = prompt.get_untracked();
        set_busy.set(true);
        set_answer.set(String::new());
        set_timing.set(String::new());
        wasm_bindgen_futures::spawn_local(async move {
            // The engine leaves its slot while it runs, so no borrow is held across an await.
            let Some(mut loaded) = slot.borrow_mut().take() else {
                return;
            };
            let result = async {
                let Loaded { engine, tokenizer } = &mut loaded;
                let ids = tokenizer.chat_prompt(&text, false)?;
                crate::engine::generate::check_prompt(&engine.model, &ids, 64)?;
                let mut so_far = Vec::new();
                let stop = engine.model.cfg.eos_token_ids.clone();
                let g = generate_greedy(engine, &ids, 64, &stop, &mut |_, id| {
                    so_far.push(id);
                    if let Ok(t) = tokenizer.decode(&so_far) {
                        set_answer.set(t);
                    }
                })
                .await?;
                Ok::<_, Error>(format!(
                    "{} prompt tokens, {} new tokens; TTFT {:.1} ms, TPOT {:.2} ms",
                    ids.len(),
                    g.tokens.len(),
                    g.ttft_ms(),
                    g.tpot_ms()
                ))
            }
            .await;
            *slot.borrow_mut() = Some(loaded);
            set_timing.set(result.unwrap_or_else(|e| format!("Error: {e}")));
            set_busy.set(false);
        });
    };

    view! {
        <main>
            <h1>"tokenmeter"</h1>
            <p class="status" data-testid="status">{move || status.get()}</p>
            <label for="prompt">"Prompt"</label>
            <textarea
                id="prompt"
                rows="3"
                prop:value=move || prompt.get()
                on:input=move |ev| set_prompt.set(event_target_value(&ev))
            ></textarea>
            <button data-testid="generate" on:click=generate disabled=move || !ready.get() || busy.get()>
                {move || if busy.get() { "Generating…" } else { "Generate" }}
            </button>
            <pre class="answer" data-testid="answer">{move || answer.get()}</pre>
            <p class="timing" data-testid="timing">{move || timing.get()}</p>
            <p class="note">
                "The embedded model has random weights: its answers are gibberish by design. It exists so the page runs with no download."
            </p>
        </main>
    }
}
