//! Type a prompt, watch the answer stream with each token's latency. Uses the loaded model with
//! the real Qwen3 tokenizer and chat template (the embedded default shares Qwen3's vocabulary).

use super::i18n::use_text;
use super::state::{AppState, Phase};
use crate::web::protocol::ToEngine;
use leptos::prelude::*;

const MAX_NEW_TOKENS: usize = 64;

#[component]
pub fn Playground(state: AppState) -> impl IntoView {
    let t = use_text();
    let prompt = RwSignal::new(String::from("Why is the sky blue?"));
    let super::state::Generation { answer, pieces, timing } = state.playground;
    let busy = move || state.phase.get() == Phase::Generating;
    let ready = move || state.phase.get() == Phase::Idle && state.model_info.with(Option::is_some);

    // The engine worker generates; its pieces arrive as they are decoded (`link::apply`).
    let generate = move |_| {
        let Some(link) = super::link::get(state) else { return };
        state.phase.set(Phase::Generating);
        answer.set(String::new());
        pieces.set(Vec::new());
        timing.set(String::new());
        link.send(&ToEngine::Generate { prompt: prompt.get_untracked(), max_new_tokens: MAX_NEW_TOKENS }, &[]);
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
