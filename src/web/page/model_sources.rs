//! The model card's ways to name a model: a preset, local files by picker or drag and drop (the
//! drop lands on the whole card), a URL or Hugging Face repo id. File names and error messages are
//! shown as text nodes only.

use super::files;
use super::i18n::use_text;
use super::models::{self, preset_label};
use super::state::AppState;
use crate::web::protocol::{LoadRequest, ModelChoice, ModelSource};
use leptos::prelude::*;
use wasm_bindgen::JsCast;

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

/// Loads what was dropped on the card: a folder's files walked, or the plain files.
pub fn load_dropped(state: AppState, ev: &web_sys::DragEvent) {
    let (entries, plain) = files::drop_entries(ev);
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
}

/// The presets, and "other" standing for a model named otherwise (files, a URL).
#[component]
pub fn PresetSelect(
    state: AppState,
    /// Whether a model may load now.
    can_load: Signal<bool>,
) -> impl IntoView {
    let t = use_text();
    view! {
        <select
            data-testid="model"
            aria-labelledby="model-title"
            disabled=move || !can_load.get()
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
    }
}

/// The drop hint and the two pickers: a folder, or files.
#[component]
pub fn FilePickers(
    state: AppState,
    /// Whether a model may load now.
    can_load: Signal<bool>,
) -> impl IntoView {
    let t = use_text();
    // Picks a folder (the view macro has no spelling for this non-standard attribute).
    let folder_input = NodeRef::<leptos::html::Input>::new();
    Effect::new(move |_| {
        if let Some(input) = folder_input.get() {
            let _ = input.set_attribute("webkitdirectory", "");
        }
    });
    let on_pick = move |ev: leptos::ev::Event| {
        let Some(input) = ev.target().and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok()) else { return };
        let picked = files::from_input(&input);
        // The same files picked again must fire `change` again.
        input.set_value("");
        load_files(state, picked);
    };
    view! {
        <div class="drop" data-testid="drop">
            <span class="note">{move || t().drop_hint}</span>
            <div class="row">
                <label class="button small" class:disabled=move || !can_load.get()>
                    {move || t().pick_folder}
                    <input
                        type="file"
                        class="hidden-input"
                        data-testid="pick-folder"
                        node_ref=folder_input
                        multiple=true
                        disabled=move || !can_load.get()
                        on:change=on_pick
                    />
                </label>
                <label class="button small" class:disabled=move || !can_load.get()>
                    {move || t().pick_files}
                    <input
                        type="file"
                        class="hidden-input"
                        data-testid="pick-files"
                        accept=".json,.safetensors"
                        multiple=true
                        disabled=move || !can_load.get()
                        on:change=on_pick
                    />
                </label>
            </div>
        </div>
    }
}

/// A URL or Hugging Face repo id, filled in with the remote model the page was opened with.
#[component]
pub fn UrlForm(
    state: AppState,
    /// Whether a model may load now.
    can_load: Signal<bool>,
) -> impl IntoView {
    let t = use_text();
    let url = RwSignal::new(match state.choice.get_untracked() {
        ModelSource::Remote { input } => input,
        _ => String::new(),
    });
    let load_url = move || {
        let input = url.get_untracked().trim().to_string();
        if !input.is_empty() {
            models::load(state, LoadRequest::Remote(input));
        }
    };
    view! {
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
            <button class="small" type="submit" data-testid="model-url-load" disabled=move || !can_load.get()>
                {move || t().load}
            </button>
        </form>
    }
}
