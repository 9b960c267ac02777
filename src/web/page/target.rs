//! Where a run's requests go: the in-browser engine (default) or a remote OpenAI-compatible
//! server. The URL, model name and API style are mirrored in the page's link like the workload;
//! the API key lives in one signal for the session only: never in the link, the history, the
//! downloads or the console.

use super::i18n::{use_text, Text};
use crate::bench::base::field::Field;
use crate::bench::base::lang::Lang;
use crate::bench::base::rules::Rule;
use crate::bench::WorkloadSpec;
use crate::remote::browser::{self, Client};
use crate::remote::{Api, ApiKey, BaseUrl, Endpoint};
use leptos::prelude::*;

/// Seconds one request is assumed to take, for the connection warning: a typical server's
/// 30 ms per output token plus half a second of prefill and queueing. Deliberately rough.
pub fn expected_request_s(spec: &WorkloadSpec) -> f64 {
    let mean_output = (spec.output_len.min + spec.output_len.max) as f64 / 2.0;
    0.5 + 0.03 * mean_output
}

/// The page's HTTP/1.1 warning, when the workload would queue inside the browser: the expected
/// requests in flight, rounded up.
pub fn connection_warning(base_url: &str, spec: &WorkloadSpec) -> Option<usize> {
    let expected = browser::expected_concurrency(spec, expected_request_s(spec));
    browser::http1_limit_exceeded(base_url, expected).map(|n| n.ceil() as usize)
}

/// The target's fields as typed. `api_key` is never written anywhere.
#[derive(Clone, Copy)]
pub struct TargetSettings {
    /// "browser" or "remote".
    pub kind: RwSignal<String>,
    pub base_url: RwSignal<String>,
    pub model: RwSignal<String>,
    /// "completions" or "chat".
    pub api: RwSignal<String>,
    pub api_key: RwSignal<String>,
    /// `GET /v1/models`'s answer, or why it failed.
    pub models: RwSignal<Result<Vec<String>, String>>,
    pub fetching: RwSignal<bool>,
    /// Scrape the server's `/metrics` (at the endpoint's origin) during each run.
    pub server_metrics: RwSignal<bool>,
}

const DEFAULT_BASE_URL: &str = "http://127.0.0.1:8080/v1";

impl TargetSettings {
    /// Defaults, overridden by the query string (`target=remote&endpoint=…&served_model=…&api=…`).
    pub fn from_query() -> TargetSettings {
        let query = |key: &str, default: &str| {
            RwSignal::new(crate::web::browser::query_param(key).unwrap_or_else(|| default.to_string()))
        };
        TargetSettings {
            kind: query("target", "browser"),
            base_url: query(Field::Endpoint.key(), DEFAULT_BASE_URL),
            model: query(Field::ServedModel.key(), Field::ServedModel.default_value()),
            api: query(Field::Api.key(), Field::Api.default_value()),
            api_key: RwSignal::new(String::new()),
            models: RwSignal::new(Ok(Vec::new())),
            fetching: RwSignal::new(false),
            server_metrics: RwSignal::new(crate::web::browser::query_param("server_metrics").as_deref() == Some("1")),
        }
    }

    pub fn is_remote(&self) -> bool {
        self.kind.get() == "remote"
    }

    /// The run request's target fields as typed (tracked): a server's API root, model name and
    /// API; `None` for the engine (and for every other field).
    pub fn value(&self, field: Field) -> Option<String> {
        if !self.is_remote() {
            return None;
        }
        match field {
            Field::Endpoint => Some(self.base_url.get().trim().to_string()),
            Field::ServedModel => Some(self.model.get().trim().to_string()),
            Field::Api => Some(self.api.get()),
            _ => None,
        }
    }

    /// Sets one of the server's fields to a saved request's value (other fields: nothing).
    pub fn restore(&self, field: Field, value: String) {
        match field {
            Field::Endpoint => self.base_url.set(value),
            Field::ServedModel => self.model.set(value),
            Field::Api => self.api.set(value),
            _ => {}
        }
    }

    /// What the link carries (tracked): the remote target without its key.
    pub fn query_pairs(&self) -> Vec<(&'static str, String)> {
        if !self.is_remote() {
            return Vec::new();
        }
        let mut pairs = vec![("target", "remote".to_string())];
        if self.server_metrics.get() {
            pairs.push(("server_metrics", "1".to_string()));
        }
        for (key, value, default) in [
            (Field::Endpoint.key(), self.base_url, DEFAULT_BASE_URL),
            (Field::ServedModel.key(), self.model, Field::ServedModel.default_value()),
            (Field::Api.key(), self.api, Field::Api.default_value()),
        ] {
            let value = value.get();
            if value != default {
                pairs.push((key, value));
            }
        }
        pairs
    }

    /// The endpoint as typed (tracked), or what is wrong with it in `lang`; the model may still
    /// be empty.
    pub fn endpoint(&self, lang: Lang) -> Result<Endpoint, String> {
        let base_url = BaseUrl::read(self.base_url.get().trim()).map_err(|rule| rule.text(lang))?;
        let api = self.api.get();
        let api = api.parse::<Api>().map_err(|_| {
            Rule::Choice { name: "API", value: api.clone(), expected: "completions or chat" }.text(lang)
        })?;
        let api_key = ApiKey::new(self.api_key.get());
        Ok(Endpoint { base_url, model: self.model.get().trim().to_string(), api, api_key, thinking: None })
    }

    /// The endpoint a run can use: a valid URL and a model name (tracked).
    pub fn runnable(&self, t: &Text) -> Result<Endpoint, String> {
        let endpoint = self.endpoint(t.lang)?;
        if endpoint.model.is_empty() {
            return Err(t.remote_needs_model.to_string());
        }
        Ok(endpoint)
    }

    /// The `/metrics` URL to scrape during a run, when asked for (tracked).
    pub fn server_metrics_url(&self) -> Option<String> {
        self.server_metrics
            .get()
            .then(|| crate::bench::measure::server_metrics::default_url(self.base_url.get().trim()))
    }

    /// `GET /v1/models` into `models`; picks the only model when the name is empty.
    pub fn fetch_models(self, lang: Lang) {
        let endpoint = match self.endpoint(lang) {
            Ok(endpoint) => endpoint,
            Err(e) => return self.models.set(Err(e)),
        };
        self.fetching.set(true);
        wasm_bindgen_futures::spawn_local(async move {
            let listed = Client::new(endpoint).models(30.0).await.map_err(|e| e.to_string());
            if let Ok([only]) = listed.as_deref() {
                if self.model.get_untracked().trim().is_empty() {
                    self.model.set(only.clone());
                }
            }
            self.models.set(listed);
            self.fetching.set(false);
        });
    }
}

/// The target card: engine or server, and the server's fields. `spec` is the workload as
/// validated (for the connection warning); `locked` while a run is going; `engine`: whether this
/// browser's engine can run (it has WebGPU).
#[component]
pub fn TargetPanel(
    target: TargetSettings,
    spec: Signal<Option<WorkloadSpec>>,
    locked: Signal<bool>,
    engine: Signal<bool>,
) -> impl IntoView {
    let t = use_text();
    let remote = move || target.is_remote();
    let text_input = move |value: RwSignal<String>, testid: &'static str, kind: &'static str| {
        view! {
            <input
                type=kind
                data-testid=testid
                autocomplete="off"
                spellcheck="false"
                prop:value=move || value.get()
                disabled=move || locked.get()
                on:input=move |ev| value.set(event_target_value(&ev))
            />
        }
    };
    let url_problem = move || target.endpoint(t().lang).err();
    let warning = move || {
        let spec = spec.get()?;
        let n = connection_warning(&target.base_url.get(), &spec)?;
        Some(t().http1_warning.replace("{n}", &n.to_string()))
    };
    let models = move || target.models.get().unwrap_or_default();
    let models_error = move || target.models.get().err();
    view! {
        <section class="card" aria-labelledby="target-title">
            <h2 id="target-title">{move || t().target}</h2>
            <div class="fields">
                <label class="field wide">
                    <select
                        data-testid="target-kind"
                        aria-label=move || t().target
                        disabled=move || locked.get()
                        prop:value=move || target.kind.get()
                        on:change=move |ev| target.kind.set(event_target_value(&ev))
                    >
                        <option value="browser" selected=move || !remote() disabled=move || !engine.get()>
                            {move || t().target_browser}
                        </option>
                        <option value="remote" selected=remote>{move || t().target_remote}</option>
                    </select>
                </label>
            </div>
            <Show when=remote>
                <div class="fields">
                    <label class="field wide" class:invalid=move || url_problem().is_some()>
                        <span class="field-label">{move || t().endpoint}</span>
                        {text_input(target.base_url, "target-endpoint", "url")}
                        <span class="field-hint">{move || t().endpoint_hint}</span>
                        <span class="field-error" role="alert">{url_problem}</span>
                    </label>
                    <label class="field wide">
                        <span class="field-label">{move || t().served_model}</span>
                        <input
                            data-testid="target-model"
                            list="target-models"
                            autocomplete="off"
                            spellcheck="false"
                            prop:value=move || target.model.get()
                            disabled=move || locked.get()
                            on:input=move |ev| target.model.set(event_target_value(&ev))
                        />
                        <datalist id="target-models">
                            {move || {
                                models()
                                    .into_iter()
                                    .map(|m| {
                                        let label = m.clone();
                                        view! { <option value=m>{label}</option> }
                                    })
                                    .collect_view()
                            }}
                        </datalist>
                    </label>
                    <button
                        class="ghost"
                        data-testid="fetch-models"
                        disabled=move || locked.get() || target.fetching.get()
                        on:click=move |_| target.fetch_models(t().lang)
                    >
                        {move || if target.fetching.get() { t().fetching_models } else { t().fetch_models }}
                    </button>
                    {move || {
                        models_error()
                            .map(|e| {
                                view! {
                                    <p class="error" role="alert" data-testid="models-error">
                                        {move || t().models_failed}
                                        ": "
                                        {e}
                                    </p>
                                }
                            })
                    }}
                    <label class="field wide">
                        <span class="field-label">{move || t().api_key}</span>
                        {text_input(target.api_key, "target-api-key", "password")}
                        <span class="field-hint">{move || t().api_key_hint}</span>
                    </label>
                    <label class="field wide">
                        <span class="field-label">{move || t().api_style}</span>
                        <select
                            data-testid="target-api"
                            disabled=move || locked.get()
                            prop:value=move || target.api.get()
                            on:change=move |ev| target.api.set(event_target_value(&ev))
                        >
                            <option value="completions" selected=move || target.api.get() == "completions">
                                {move || t().api_completions}
                            </option>
                            <option value="chat" selected=move || target.api.get() == "chat">
                                {move || t().api_chat}
                            </option>
                        </select>
                    </label>
                    <label class="check wide">
                        <input
                            type="checkbox"
                            data-testid="target-server-metrics"
                            prop:checked=move || target.server_metrics.get()
                            disabled=move || locked.get()
                            on:change=move |ev| target.server_metrics.set(event_target_checked(&ev))
                        />
                        <span>{move || t().server_metrics}</span>
                    </label>
                </div>
                {move || {
                    target
                        .server_metrics
                        .get()
                        .then(|| view! { <p class="note" data-testid="gpu-energy-note">{t().gpu_energy_note}</p> })
                }}
                {move || warning().map(|w| view! { <p class="note warn" data-testid="http1-warning">{w}</p> })}
                <p class="note">{move || t().remote_note}</p>
            </Show>
        </section>
    }
}
