//! The dataset picker: a file of requests (a ShareGPT JSON list, a JSONL of
//! `{prompt | input_len, output_len}`, or a trace JSONL of `{timestamp, input_length,
//! output_length}`) read like picked model files (`BlobStore`, bounded by
//! `limits::DATASET_MAX_BYTES`) and parsed by `bench::traffic::dataset`. At run time its rows become the
//! workload, their lengths measured with the run's tokenizer, as the CLI's `bench --dataset`;
//! the file's name and options go into the record (`run_config.workload.dataset`). The picked
//! file crosses to the engine worker as a [`DatasetChoice`], where `web::worker::dataset` makes
//! it the run's requests.

use super::i18n::use_text;
use crate::bench::traffic::dataset::{self, Dataset, DatasetFormat, DEFAULT_BLOCK_TOKENS};
use crate::limits;
use crate::model::source::BlobStore;
use crate::model::ModelStore;
use crate::web::protocol::DatasetChoice;
use crate::{Error, Result};
use leptos::prelude::*;
use std::sync::Arc;
use wasm_bindgen::JsCast;

/// The file picked, as read.
#[derive(Clone)]
pub struct Picked {
    pub name: String,
    pub bytes: Arc<Vec<u8>>,
}

/// The picker's state: the file, its parse under the chosen format, the options.
#[derive(Clone, Copy)]
pub struct DatasetState {
    pub picked: RwSignal<Option<Picked>>,
    /// "auto" (guessed from the content), "sharegpt", "jsonl" or "trace".
    pub format: RwSignal<String>,
    pub speedup: RwSignal<String>,
    /// Tokens per `hash_ids` block (a shared-block trace's; the CLI's `--trace-block-size`).
    pub block_tokens: RwSignal<String>,
    /// The parse of `picked` under `format`: the rows, or one line saying what is wrong and where.
    pub parsed: RwSignal<Option<std::result::Result<Arc<Dataset>, String>>>,
    pub reading: RwSignal<bool>,
}

impl DatasetState {
    /// The picked file's name (tracked), the run request's `Field::Dataset`; `None`: none picked.
    pub fn name(&self) -> Option<String> {
        self.picked.with(|p| p.as_ref().map(|p| p.name.clone()))
    }

    /// What a run takes from the picker (untracked): `None` when no file is picked; an error when
    /// the file did not parse or the speedup is not a number.
    pub fn choice(&self) -> Result<Option<DatasetChoice>> {
        let data = match self.parsed.get_untracked() {
            None => return Ok(None),
            Some(Err(e)) => return Err(Error::Invalid(e)),
            Some(Ok(data)) => data,
        };
        let speedup = self.speedup.with_untracked(|s| s.trim().parse::<f64>()).map_err(|_| {
            Error::Invalid(format!(
                "trace speedup {:?} is not a number",
                limits::printable(&self.speedup.get_untracked())
            ))
        })?;
        let block = self.block_tokens.get_untracked();
        let block_tokens = block.trim().parse::<usize>().ok().filter(|&n| n > 0).ok_or_else(|| {
            Error::Invalid(format!(
                "trace block size {:?}: expected a whole number of tokens",
                limits::printable(&block)
            ))
        })?;
        Ok(Some(DatasetChoice { data, speedup, block_tokens }))
    }

    pub fn new() -> DatasetState {
        DatasetState {
            picked: RwSignal::new(None),
            format: RwSignal::new("auto".into()),
            speedup: RwSignal::new("1".into()),
            block_tokens: RwSignal::new(DEFAULT_BLOCK_TOKENS.to_string()),
            parsed: RwSignal::new(None),
            reading: RwSignal::new(false),
        }
    }

    /// Parses the picked file again (after a pick or a change of format).
    fn parse(&self) {
        let parsed = self.picked.with_untracked(|p| {
            let p = p.as_ref()?;
            let format = self.format.with_untracked(|f| (f != "auto").then(|| f.parse::<DatasetFormat>()));
            let parsed = match format {
                Some(Err(e)) => Err(e),
                Some(Ok(format)) => dataset::parse(&p.name, &p.bytes, Some(format)),
                None => dataset::parse(&p.name, &p.bytes, None),
            };
            Some(parsed.map(Arc::new).map_err(|e| one_line(&e.to_string())))
        });
        self.parsed.set(parsed);
    }

    fn clear(&self) {
        self.picked.set(None);
        self.parsed.set(None);
    }
}

impl Default for DatasetState {
    fn default() -> Self {
        DatasetState::new()
    }
}

/// A message as one line (a file's text may hold line breaks), at most 300 characters.
fn one_line(message: &str) -> String {
    let flat: String = message.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    match flat.char_indices().nth(300) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

/// Reads the file of a file input into `x`.
fn read(x: DatasetState, input: web_sys::HtmlInputElement) {
    let Some(file) = input.files().and_then(|list| list.get(0)) else { return };
    let name = file.name();
    x.reading.set(true);
    wasm_bindgen_futures::spawn_local(async move {
        let mut store = BlobStore { label: name.clone(), ..BlobStore::default() };
        store.files.insert(name.clone(), file.into());
        let read = store.read_all(&name, limits::DATASET_MAX_BYTES).await;
        x.reading.set(false);
        // The same file picked again must fire `change` again.
        input.set_value("");
        match read {
            Ok(Some(bytes)) => {
                x.picked.set(Some(Picked { name, bytes: Arc::new(bytes) }));
                x.parse();
            }
            Ok(None) => x.clear(),
            Err(e) => {
                x.picked.set(None);
                x.parsed.set(Some(Err(one_line(&e.to_string()))));
            }
        }
    });
}

/// The picker, inside the settings card: a file button, the file's name and rows (or its one-line
/// error), the format and the trace speedup.
#[component]
pub fn DatasetPicker(x: DatasetState, locked: Signal<bool>) -> impl IntoView {
    let t = use_text();
    let on_pick = move |ev: leptos::ev::Event| {
        if let Some(input) = ev.target().and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok()) {
            read(x, input);
        }
    };
    let summary = move || match x.parsed.get() {
        None => None,
        Some(Ok(d)) => {
            let name = x.picked.with(|p| p.as_ref().map(|p| p.name.clone())).unwrap_or_default();
            Some(
                view! {
                    <span class="dataset-name" data-testid="dataset-name">
                        {name} " · " {d.rows.len()} " " {t().dataset_rows} " (" {d.format.name()} ")"
                    </span>
                }
                .into_any(),
            )
        }
        Some(Err(e)) => {
            Some(view! { <span class="field-error" role="alert" data-testid="dataset-error">{e}</span> }.into_any())
        }
    };
    let is_trace = move || x.parsed.with(|p| matches!(p, Some(Ok(d)) if d.format == DatasetFormat::Trace));
    let has_blocks = move || x.parsed.with(|p| matches!(p, Some(Ok(d)) if d.rows.iter().any(|r| r.hash_ids.is_some())));
    view! {
        <div class="dataset" data-testid="dataset">
            <div class="row dataset-row">
                <label class="button" class:disabled=move || locked.get() || x.reading.get()>
                    {move || t().dataset_pick}
                    <input
                        type="file"
                        class="hidden-input"
                        data-testid="dataset-file"
                        accept=".json,.jsonl,application/json"
                        disabled=move || locked.get() || x.reading.get()
                        on:change=on_pick
                    />
                </label>
                <Show
                    when=move || x.parsed.with(Option::is_some)
                    fallback=move || view! { <span class="muted dataset-none">{move || t().dataset_none}</span> }
                >
                    {summary}
                    <button
                        class="link"
                        data-testid="dataset-remove"
                        disabled=move || locked.get()
                        on:click=move |_| x.clear()
                    >
                        {move || t().dataset_remove}
                    </button>
                </Show>
            </div>
            <span class="field-hint">{move || t().dataset_hint}</span>
            <div class="fields">
                <label class="field">
                    <span class="field-label">{move || t().dataset_format}</span>
                    <select
                        data-testid="dataset-format"
                        disabled=move || locked.get()
                        prop:value=move || x.format.get()
                        on:change=move |ev| {
                            x.format.set(event_target_value(&ev));
                            x.parse();
                        }
                    >
                        <option value="auto">{move || t().dataset_auto}</option>
                        <option value="sharegpt">"ShareGPT"</option>
                        <option value="jsonl">"JSONL"</option>
                        <option value="trace">{move || t().dataset_trace}</option>
                    </select>
                </label>
                <label class="field" class:muted=move || !is_trace()>
                    <span class="field-label">{move || t().dataset_speedup}</span>
                    <input
                        data-testid="dataset-speedup"
                        autocomplete="off"
                        disabled=move || locked.get() || !is_trace()
                        prop:value=move || x.speedup.get()
                        on:input=move |ev| x.speedup.set(event_target_value(&ev))
                    />
                    <span class="field-hint">{move || t().dataset_speedup_hint}</span>
                </label>
                <label class="field" class:muted=move || !has_blocks()>
                    <span class="field-label">{move || t().dataset_block}</span>
                    <input
                        data-testid="dataset-block"
                        autocomplete="off"
                        inputmode="numeric"
                        disabled=move || locked.get() || !has_blocks()
                        prop:value=move || x.block_tokens.get()
                        on:input=move |ev| x.block_tokens.set(event_target_value(&ev))
                    />
                    <span class="field-hint">{move || t().dataset_block_hint}</span>
                </label>
            </div>
        </div>
    }
}
