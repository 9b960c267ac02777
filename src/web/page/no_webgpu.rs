//! A browser without WebGPU: why the engine worker opened no device ([`NoWebGpu`], found at
//! start-up by the worker's loader) and the notice the page shows then: which browsers offer
//! WebGPU, and that a server needs none. The page's tokenizer is loaded all the same, so a chat run
//! against a server works in such a browser.

use super::i18n::{use_text, Label};
use crate::web::protocol::NoWebGpu;
use leptos::prelude::*;

/// The notice above the page while the engine has no WebGPU. All text is the page's own (no
/// browser or wgpu message), as text nodes.
#[component]
pub fn NoWebGpuNotice(why: RwSignal<Option<NoWebGpu>>) -> impl IntoView {
    let t = use_text();
    move || {
        why.get().map(|why| {
            let (title, cause): (Label, Label) = match why {
                NoWebGpu::Missing => (|t| t.no_webgpu_missing_title, |t| t.no_webgpu_missing),
                NoWebGpu::NoAdapter => (|t| t.no_webgpu_no_adapter_title, |t| t.no_webgpu_no_adapter),
            };
            view! {
                <section class="card notice" aria-labelledby="no-webgpu-title" data-testid="no-webgpu" data-why=why.key()>
                    <h2 id="no-webgpu-title">{move || title(t())}</h2>
                    <p>{move || cause(t())}</p>
                    <p>{move || t().no_webgpu_browsers}</p>
                    <p>{move || t().no_webgpu_server}</p>
                </section>
            }
        })
    }
}
