//! Type a prompt, watch the answer stream with each token's latency. Uses the loaded model with
//! the real Qwen3 tokenizer and chat template (the embedded default shares Qwen3's vocabulary).

use super::i18n::use_text;
use super::state::{AppState, Phase};
use crate::clock::now_s;
use crate::engine::{generate_greedy, Engine};
use crate::Error;
use leptos::prelude::*;

const MAX_NEW_TOKENS: usize = 64;

/// One piece of the answer as it appeared: its text and the time since the previous piece.
#[derive(Clone, Debug, PartialEq)]
struct Piece {
    text: String,
    gap_ms: f64,
}

#[component]
pub fn Playground(state: AppState) -> impl IntoView {
    let t = use_text();
    let prompt = RwSignal::new(String::from("Why is the sky blue?"));
    let answer = RwSignal::new(String::new());
    let pieces = RwSignal::new(Vec::<Piece>::new());
    let timing = RwSignal::new(String::new());
    let busy = move || state.phase.get() == Phase::Generating;
    let ready = move || state.phase.get() == Phase::Idle && state.model_info.with(Option::is_some);

    let generate = move |_| {
        let (Some(mut loaded), Some(tokenizer)) = (state.host().take_model(), state.host().tokenizer()) else {
            return;
        };
        let text = prompt.get_untracked();
        state.phase.set(Phase::Generating);
        answer.set(String::new());
        pieces.set(Vec::new());
        timing.set(String::new());
        wasm_bindgen_futures::spawn_local(async move {
            // The model is out of its slot for the whole generation: no borrow spans an await.
            let mut engine = Engine::new(loaded.model);
            let result = async {
                let ids = tokenizer.chat_prompt(&text, false)?;
                crate::engine::generate::check_prompt(&engine.model.cfg, &engine.model.limits, &ids, MAX_NEW_TOKENS)?;
                let stop = engine.model.cfg.eos_token_ids.clone();
                let (mut so_far, mut shown, mut last_s) = (Vec::new(), 0, now_s());
                let g = generate_greedy(&mut engine, &ids, MAX_NEW_TOKENS, &stop, &mut |_, id| {
                    so_far.push(id);
                    // A character split over tokens decodes to U+FFFD until its last byte arrives.
                    let Ok(text) = tokenizer.decode(&so_far) else { return };
                    if text.len() > shown && !text.ends_with('\u{fffd}') && text.is_char_boundary(shown) {
                        let now = now_s();
                        let piece = Piece { text: text[shown..].to_string(), gap_ms: (now - last_s) * 1e3 };
                        (shown, last_s) = (text.len(), now);
                        pieces.update(|p| p.push(piece));
                        answer.set(text);
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
            loaded.model = engine.model;
            state.host().put_model(loaded);
            timing.set(result.unwrap_or_else(|e| format!("Error: {e}")));
            super::models::forget_faulty_gpu(state);
            state.phase.set(Phase::Idle);
        });
    };

    view! {
        <section class="card" aria-labelledby="playground-title">
            <div class="card-head">
                <h2 id="playground-title">{move || t().playground}</h2>
            </div>
            <label class="field-label" for="prompt">
                {move || t().prompt}
            </label>
            <textarea
                id="prompt"
                rows="3"
                prop:value=move || prompt.get()
                on:input=move |ev| prompt.set(event_target_value(&ev))
            ></textarea>
            <div class="row">
                <button
                    class="primary"
                    data-testid="generate"
                    on:click=generate
                    disabled=move || !ready()
                >
                    {move || if busy() { t().generating } else { t().generate }}
                </button>
                <span class="timing num" data-testid="timing">
                    {move || timing.get()}
                </span>
            </div>
            <pre class="answer" data-testid="answer">{move || answer.get()}</pre>
            <Show when=move || pieces.with(|p| !p.is_empty())>
                <p class="note">{move || t().token_latency}</p>
                <div class="tokens" data-testid="tokens">
                    {move || {
                        pieces
                            .get()
                            .into_iter()
                            .map(|p| {
                                view! {
                                    <span class="token">
                                        <span class="token-text">{p.text}</span>
                                        <span class="token-ms num">{format!("{:.0}", p.gap_ms)}</span>
                                    </span>
                                }
                            })
                            .collect_view()
                    }}
                </div>
            </Show>
            <p class="note">{move || t().playground_note}</p>
        </section>
    }
}
