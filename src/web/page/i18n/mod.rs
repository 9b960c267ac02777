//! The page's words in English and Chinese. The benchmark's own texts (report, diagnosis) come
//! from `crate::bench` in the same two languages, so one [`Lang`] drives both.

use crate::bench::Lang;
use leptos::prelude::*;

mod en;
mod zh;

/// Every label on the page, in one language.
pub struct Text {
    pub tagline: &'static str,
    /// The language these labels are in (for messages the library words: `crate::bench::base::rules`).
    pub lang: Lang,
    pub language: &'static str,
    // Status line.
    pub starting: &'static str,
    pub requesting_adapter: &'static str,
    pub loading_tokenizer: &'static str,
    pub generating_weights: &'static str,
    pub ready: &'static str,
    pub error: &'static str,
    pub on: &'static str,
    /// No WebGPU (see `web::page::no_webgpu`): the status line, the notice's titles and lines. The
    /// browsers are MDN's browser-compat-data for `WorkerNavigator.gpu` (the engine runs in a
    /// worker), as of August 2026.
    pub no_webgpu_status: &'static str,
    pub no_webgpu_missing_title: &'static str,
    pub no_webgpu_missing: &'static str,
    pub no_webgpu_no_adapter_title: &'static str,
    pub no_webgpu_no_adapter: &'static str,
    pub no_webgpu_browsers: &'static str,
    pub no_webgpu_server: &'static str,
    // Model panel.
    pub model: &'static str,
    pub model_embedded: &'static str,
    pub model_06b: &'static str,
    pub model_17b: &'static str,
    pub layers: &'static str,
    pub hidden: &'static str,
    /// The model card's time to ready (`web::page::ready`).
    pub time_to_ready: &'static str,
    pub ready_cold: &'static str,
    pub ready_cached: &'static str,
    pub ready_last: &'static str,
    pub ready_note: &'static str,
    pub vocab: &'static str,
    pub weights: &'static str,
    pub kv_cache: &'static str,
    pub model_embedded_short: &'static str,
    pub model_06b_short: &'static str,
    pub model_17b_short: &'static str,
    pub random_weights: &'static str,
    /// The model card's load-time ceiling of the settings' max batch and max batched tokens (a run
    /// uses the settings').
    pub capacity: &'static str,
    pub random_weights_note: &'static str,
    pub model_other: &'static str,
    pub opening_files: &'static str,
    pub uploading_weights: &'static str,
    pub choosing_kernels: &'static str,
    pub kernel_trial: &'static str,
    pub trial_cached: &'static str,
    pub trial_forced: &'static str,
    pub trial_only_choice: &'static str,
    pub trial_prefill_attention: &'static str,
    pub trial_subgroups: &'static str,
    pub trial_matmul_tile: &'static str,
    pub trial_gemv_m1: &'static str,
    pub trial_gemv_rows4: &'static str,
    pub trial_tile_prefetch: &'static str,
    pub trial_tiled: &'static str,
    pub trial_untiled: &'static str,
    pub trial_on: &'static str,
    pub trial_off: &'static str,
    pub trial_cut_short: &'static str,
    pub load_failed: &'static str,
    pub drop_hint: &'static str,
    pub pick_folder: &'static str,
    pub pick_files: &'static str,
    pub model_url: &'static str,
    /// A model named by a link waits for the user: the question, the size line, the two answers.
    pub link_model_question: &'static str,
    pub link_model_size: &'static str,
    pub link_model_size_unknown: &'static str,
    pub link_model_download: &'static str,
    pub link_model_decline: &'static str,
    pub link_model_waiting: &'static str,
    pub load: &'static str,
    pub cached_models: &'static str,
    pub model_note: &'static str,
    pub adapter: &'static str,
    pub adapter_name: &'static str,
    pub adapter_backend: &'static str,
    pub adapter_features: &'static str,
    pub ran_on: &'static str,
    pub timer_resolution: &'static str,
    pub roofline_measure: &'static str,
    pub roofline_measuring: &'static str,
    pub roofline_copy: &'static str,
    pub roofline_read: &'static str,
    pub roofline_fma: &'static str,
    pub roofline_dispatch: &'static str,
    pub sweep: &'static str,
    pub sweep_hint: &'static str,
    pub sweep_rate: &'static str,
    pub sweep_x: &'static str,
    pub sweep_y: &'static str,
    pub knee: &'static str,
    pub knee_slo: &'static str,
    pub knee_flat: &'static str,
    pub knee_sustained: &'static str,
    pub knee_below: &'static str,
    pub knee_none: &'static str,
    // The search for the highest rate within the SLOs (rate `max`).
    pub search: &'static str,
    pub search_trying: &'static str,
    pub search_spent: &'static str,
    pub search_found: &'static str,
    pub search_none: &'static str,
    pub search_no_limit: &'static str,
    pub search_not_narrowed: &'static str,
    pub search_at_once: &'static str,
    pub search_within: &'static str,
    pub search_first_guess: &'static str,
    pub search_limiting: &'static str,
    pub search_stage: &'static str,
    pub search_attainment: &'static str,
    pub search_counted: &'static str,
    pub search_steady: &'static str,
    pub search_whole: &'static str,
    pub search_met: &'static str,
    pub search_missed: &'static str,
    pub search_y: &'static str,
    pub search_x: &'static str,
    // Plan card.
    pub plan: &'static str,
    pub plan_hint: &'static str,
    pub plan_slo: &'static str,
    pub plan_target: &'static str,
    pub plan_button: &'static str,
    pub plan_busy: &'static str,
    pub plan_sustains: &'static str,
    pub plan_replicas: &'static str,
    pub plan_above: &'static str,
    pub plan_below: &'static str,
    pub plan_bad_slo: &'static str,
    pub plan_other_model: &'static str,
    pub plan_x: &'static str,
    pub plan_predicted: &'static str,
    pub plan_measured: &'static str,
    pub plan_legend: &'static str,
    pub sweep_progress: &'static str,
    // Settings.
    pub settings: &'static str,
    pub arrival: &'static str,
    pub arrival_poisson: &'static str,
    pub arrival_gamma: &'static str,
    pub arrival_constant: &'static str,
    pub arrival_sequential: &'static str,
    pub arrival_concurrency: &'static str,
    pub rate: &'static str,
    pub rate_hint: &'static str,
    pub burstiness: &'static str,
    pub burstiness_hint: &'static str,
    pub concurrency: &'static str,
    pub requests: &'static str,
    pub input_len: &'static str,
    pub output_len: &'static str,
    pub len_hint: &'static str,
    pub seed: &'static str,
    pub max_batch: &'static str,
    pub max_batched_tokens: &'static str,
    pub slo_ttft: &'static str,
    pub cost_per_hour: &'static str,
    pub cost_per_hour_hint: &'static str,
    pub turns: &'static str,
    pub turns_hint: &'static str,
    pub think_time: &'static str,
    pub think_time_hint: &'static str,
    pub warmup_requests: &'static str,
    pub warmup_requests_hint: &'static str,
    pub warmup_s: &'static str,
    pub warmup_s_hint: &'static str,
    pub cooldown_s: &'static str,
    pub cooldown_s_hint: &'static str,
    pub slo_tpot: &'static str,
    pub attainment: &'static str,
    pub attainment_hint: &'static str,
    pub cancelled_requests: &'static str,
    pub rate_sized_line: &'static str,
    /// A run's name's words (names.rs).
    pub name_sequential: &'static str,
    pub name_concurrency: &'static str,
    pub name_poisson: &'static str,
    pub name_gamma: &'static str,
    pub name_constant: &'static str,
    pub name_trace: &'static str,
    pub name_batch: &'static str,
    pub name_cancelled: &'static str,
    /// The timer's resolution when the page is cross-origin isolated; a search's stages.
    pub cross_origin_isolated: &'static str,
    pub stage_probe: &'static str,
    pub stage_first: &'static str,
    pub stage_bracket: &'static str,
    pub stage_narrow: &'static str,
    pub stage_repeat: &'static str,
    /// A cached model's file count; the adapter card's kernel family.
    pub cached_files: &'static str,
    pub kernel_family: &'static str,
    pub rate_sized_mark: &'static str,
    pub rate_from_baseline: &'static str,
    pub cancel_share: &'static str,
    pub cancel_share_hint: &'static str,
    pub cancel_after: &'static str,
    pub cancel_after_hint: &'static str,
    pub find_max_rate: &'static str,
    pub find_max_rate_hint: &'static str,
    pub search_needs_slo: &'static str,
    pub slo_hint: &'static str,
    pub prompts: &'static str,
    pub prompts_text: &'static str,
    pub prompts_random: &'static str,
    pub workload: &'static str,
    pub engine: &'static str,
    pub slo: &'static str,
    pub reset: &'static str,
    pub not_a_count: &'static str,
    // Run.
    pub run: &'static str,
    pub cancel: &'static str,
    /// Before the line saying what Run will run (`run::run_plan`).
    pub run_plan: &'static str,
    pub cancelling: &'static str,
    pub measuring_baseline: &'static str,
    pub finished: &'static str,
    pub run_failed: &'static str,
    pub fix_settings: &'static str,
    // Charts.
    pub live: &'static str,
    pub chart_ttft: &'static str,
    /// A thinking model's replies only.
    pub chart_ttfat: &'static str,
    pub chart_tpot: &'static str,
    pub chart_throughput: &'static str,
    pub chart_batch: &'static str,
    pub chart_kv: &'static str,
    pub x_arrival: &'static str,
    pub x_time: &'static str,
    pub running: &'static str,
    pub waiting: &'static str,
    pub no_data: &'static str,
    // Report.
    pub report: &'static str,
    pub completed: &'static str,
    pub failed: &'static str,
    pub duration: &'static str,
    pub request_throughput: &'static str,
    pub output_throughput: &'static str,
    pub total_throughput: &'static str,
    pub goodput: &'static str,
    pub no_slo: &'static str,
    pub preemptions: &'static str,
    pub gpu_busy: &'static str,
    pub latency_ms: &'static str,
    pub mean: &'static str,
    pub queue: &'static str,
    /// A server run's queue row: from the planned arrival to the send.
    pub client_lateness: &'static str,
    pub ttft_from_arrival: &'static str,
    pub ttft_from_send: &'static str,
    pub diagnosis: &'static str,
    pub evidence: &'static str,
    pub advice: &'static str,
    pub baseline: &'static str,
    pub text_report: &'static str,
    pub download_json: &'static str,
    pub download_csv: &'static str,
    /// The self-contained report: SVG charts, timeline, text report, run record.
    pub download_html: &'static str,
    // History.
    pub history: &'static str,
    pub history_empty: &'static str,
    pub compare_hint: &'static str,
    pub show: &'static str,
    pub delete: &'static str,
    pub run_again: &'static str,
    pub run_again_hint: &'static str,
    pub run_again_foreign: &'static str,
    pub run_again_server: &'static str,
    pub run_again_engine: &'static str,
    pub run_again_dataset: &'static str,
    pub clear: &'static str,
    pub comparison: &'static str,
    pub metric: &'static str,
    pub change: &'static str,
    pub history_not_saved: &'static str,
    pub cancelled: &'static str,
    // Playground.
    pub playground: &'static str,
    pub prompt: &'static str,
    pub generate: &'static str,
    pub generating: &'static str,
    pub playground_note: &'static str,
    pub token_latency: &'static str,
    // Remote target.
    pub target: &'static str,
    pub target_browser: &'static str,
    pub target_remote: &'static str,
    pub endpoint: &'static str,
    pub endpoint_hint: &'static str,
    pub served_model: &'static str,
    pub fetch_models: &'static str,
    pub fetching_models: &'static str,
    pub models_failed: &'static str,
    pub api_key: &'static str,
    pub api_key_hint: &'static str,
    pub server_metrics: &'static str,
    /// Why the page shows no GPU energy for a server (a DCGM exporter allows no page's origin).
    pub gpu_energy_note: &'static str,
    pub chart_server: &'static str,
    pub api_style: &'static str,
    pub api_completions: &'static str,
    pub api_chat: &'static str,
    pub remote_needs_model: &'static str,
    pub remote_note: &'static str,
    pub http1_warning: &'static str,
    // Engine switches, the Experiment card, the dataset picker, the history's A/B test.
    pub optimisations: &'static str,
    pub weight_format: &'static str,
    pub weights_hint: &'static str,
    pub speculate: &'static str,
    pub speculate_hint: &'static str,
    pub policy: &'static str,
    pub policy_fcfs: &'static str,
    pub policy_prefill_first: &'static str,
    pub policy_decode_first: &'static str,
    pub chunked_prefill: &'static str,
    pub switch_on: &'static str,
    pub switch_off: &'static str,
    pub prefill_chunk: &'static str,
    pub prefill_chunk_hint: &'static str,
    pub prefix_cache: &'static str,
    pub shared_prefix: &'static str,
    pub shared_prefix_hint: &'static str,
    pub reload_needed: &'static str,
    pub reload_model: &'static str,
    pub run_needs_reload: &'static str,
    pub run_wrong_target: &'static str,
    /// A search's entry in the history: its name's mark, and the button that opens its runs.
    pub history_search_mark: &'static str,
    pub history_search_runs: &'static str,
    pub history_failed: &'static str,
    /// A run stamped INVALID (`bench::verdict::validity`): the history's mark, the report's badge.
    pub run_invalid: &'static str,
    pub run_valid: &'static str,
    pub experiment: &'static str,
    pub experiment_note: &'static str,
    pub b_differs: &'static str,
    pub b_same: &'static str,
    pub setting: &'static str,
    pub repetitions: &'static str,
    pub run_experiment: &'static str,
    pub warmup: &'static str,
    pub repetition_of: &'static str,
    pub loading_b: &'static str,
    pub verdict: &'static str,
    pub interval: &'static str,
    pub download_experiment: &'static str,
    pub experiment_cut: &'static str,
    pub quality_heading: &'static str,
    pub quality_failed: &'static str,
    pub verify_gpu: &'static str,
    pub verify_gpu_running: &'static str,
    pub verify_gpu_title: &'static str,
    pub experiment_failed: &'static str,
    pub experiment_one_rate: &'static str,
    pub experiment_remote: &'static str,
    pub experiment_fix_b: &'static str,
    pub repetitions_hint: &'static str,
    pub dataset: &'static str,
    pub dataset_pick: &'static str,
    pub dataset_none: &'static str,
    pub dataset_hint: &'static str,
    pub dataset_format: &'static str,
    pub dataset_auto: &'static str,
    pub dataset_speedup: &'static str,
    pub dataset_speedup_hint: &'static str,
    pub dataset_block: &'static str,
    pub dataset_block_hint: &'static str,
    pub dataset_rows: &'static str,
    pub dataset_remove: &'static str,
    pub test_difference: &'static str,
    pub cannot_compare: &'static str,
    pub workloads_differ: &'static str,
    pub dataset_trace: &'static str,
}

/// A label picked from [`Text`], to be read in the current language.
pub type Label = fn(&Text) -> &'static str;

pub fn text(lang: Lang) -> &'static Text {
    match lang {
        Lang::En => &en::EN,
        Lang::Zh => &zh::ZH,
    }
}

/// The page's language, shared through context.
#[derive(Clone, Copy)]
pub struct UiLang(pub RwSignal<Lang>);

/// The labels in the current language (a tracked read: views re-render on a switch).
pub fn use_text() -> impl Fn() -> &'static Text + Copy + Send + Sync + 'static {
    let UiLang(lang) = expect_context::<UiLang>();
    move || text(lang.get())
}

/// Where the page keeps the language last picked with [`LangSwitch`].
const LANG_KEY: &str = "tokenmeter.lang";

/// The language last picked with [`LangSwitch`] in this browser (localStorage), if any.
pub fn remembered_lang() -> Option<Lang> {
    crate::web::browser::storage_get(LANG_KEY)?.parse().ok()
}

/// The page's language on load: the link's `?lang=` wins, then the one last picked, then English.
pub fn opening_lang() -> Lang {
    let link = crate::web::browser::query_param("lang").and_then(|l| l.parse().ok());
    link.or_else(remembered_lang).unwrap_or_default()
}

/// Whether the link must name `lang` for a reload (or its recipient, in most cases) to open in it:
/// Chinese always, so a shared link keeps it; English when this browser remembers Chinese.
pub fn link_names_lang(lang: Lang) -> bool {
    lang != Lang::En || remembered_lang().unwrap_or_default() != Lang::En
}

/// The language switch in the header; a click also remembers the language picked.
#[component]
pub fn LangSwitch() -> impl IntoView {
    let UiLang(lang) = expect_context::<UiLang>();
    let t = use_text();
    let option = move |value: Lang, label: &'static str| {
        view! {
            <button
                class="seg"
                class:active=move || lang.get() == value
                aria-pressed=move || (lang.get() == value).to_string()
                on:click=move |_| {
                    // Not fatal: without storage the language lasts as long as the link.
                    let _ = crate::web::browser::storage_set(LANG_KEY, value.code());
                    lang.set(value);
                }
            >
                {label}
            </button>
        }
    };
    view! {
        <div class="segmented" role="group" aria-label=move || t().language data-testid="lang">
            {option(Lang::En, "English")}
            {option(Lang::Zh, "中文")}
        </div>
    }
}
