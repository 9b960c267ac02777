//! In headless Chromium with WebGPU (SwiftShader): the same loader and engine as natively, on
//! the transformers fixtures embedded in the test binary, checked token for token.
#![cfg(target_arch = "wasm32")]

use std::rc::Rc;
use tokenmeter::engine::{generate_greedy, Engine, EngineOptions, ForwardPass};
use tokenmeter::gpu::kernels::{KernelFamily, KernelSwitches};
use tokenmeter::gpu::Gpu;
use tokenmeter::model::checkpoint::Checkpoint;
use tokenmeter::model::MemStore;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

/// The fixtures' greedy checks, shared with the Dawn harness (tests/dawn).
#[macro_use]
mod greedy;
use greedy::{check_with, transformers_fixtures, Reference};

#[wasm_bindgen_test]
async fn greedy_tokens_equal_transformers_in_the_browser() {
    let gpu = Rc::new(Gpu::new().await.expect("WebGPU adapter"));
    for (store, reference) in transformers_fixtures() {
        check_with(store, reference, gpu.clone(), &EngineOptions::default()).await;
    }
}

/// The GPU kernel family (coalesced GEMV, 64 x 64 tile, a workgroup per attention part), forced on
/// the browser's adapter as `?kernels=gpu` does (the page's link switches, parsed as the page
/// parses them), against transformers' greedy tokens.
#[wasm_bindgen_test]
async fn greedy_tokens_equal_transformers_with_the_gpu_kernel_family_in_the_browser() {
    let gpu = Rc::new(Gpu::new().await.expect("WebGPU adapter"));
    let link = |key: &str| (key == "kernels").then(|| "gpu".to_string());
    let kernels = KernelSwitches::from_query(link).unwrap();
    assert_eq!(kernels.family, Some(KernelFamily::Gpu));
    // Subgroups are asked for where offered (and kept only if they compile).
    let offered = gpu.adapter.features.iter().any(|f| f == "SUBGROUP");
    let enabled = gpu.adapter.enabled_features.iter().any(|f| f == "SUBGROUP");
    web_sys::console::log_1(&format!("subgroups offered {offered}, enabled {enabled}").into());
    assert!(enabled <= offered);
    let options = EngineOptions { kernels, ..EngineOptions::default() };
    let (store, reference) = fixture!("tiny-gqa-tied", ["config.json", "model.safetensors"]);
    check_with(store, reference, gpu.clone(), &options).await;
    let (store, reference) = fixture!("tiny-mha", ["config.json", "model.safetensors"]);
    check_with(store, reference, gpu, &options).await;
}

#[wasm_bindgen_test]
async fn bad_input_is_an_error_in_the_browser_too() {
    let (store, _) = fixture!("tiny-mha", ["config.json"]);
    let err = Checkpoint::open(&store).await.err().expect("no weights must fail").to_string();
    assert!(err.contains("no model.safetensors"), "{err}");
    let truncated = include_bytes!("../fixtures/tiny-mha/model.safetensors")[..4000].to_vec();
    let (store, _) = fixture!("tiny-mha", ["config.json"]);
    let err = Checkpoint::open(&store.with("model.safetensors", truncated)).await.err().expect("truncated").to_string();
    assert!(err.contains("outside"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// The page's logic: model sources, the cache, settings in the URL, components.

use leptos::prelude::*;
use std::collections::BTreeMap;
use tokenmeter::bench::Lang;
use tokenmeter::model::source::BlobStore;
use tokenmeter::web::cache::{self, RemoteStore};
use tokenmeter::web::page::i18n::{self, UiLang};
use tokenmeter::web::page::settings::{self, Field, Settings};
use tokenmeter::web::protocol::DownloadProgress;
use tokenmeter::web::sources::{self, remote_base};
use wasm_bindgen::JsCast;

const MHA_CONFIG: &[u8] = include_bytes!("../fixtures/tiny-mha/config.json");
const MHA_WEIGHTS: &[u8] = include_bytes!("../fixtures/tiny-mha/model.safetensors");

/// A safetensors file with its JSON header edited (data unchanged).
fn edit_header(bytes: &[u8], edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    edit(&mut header);
    let json = serde_json::to_vec(&header).unwrap();
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend(json);
    out.extend(&bytes[8 + n..]);
    out
}

async fn open_error(store: MemStore) -> String {
    match Checkpoint::open(&store).await {
        Ok(_) => panic!("{}: a malformed model opened", store.label),
        Err(e) => e.to_string(),
    }
}

#[wasm_bindgen_test]
async fn malformed_models_give_the_loaders_errors() {
    let mha = |label: &str| MemStore::new(label).with("config.json", MHA_CONFIG.to_vec());

    let truncated = MHA_WEIGHTS[..MHA_WEIGHTS.len() - 1000].to_vec();
    let err = open_error(mha("truncated").with("model.safetensors", truncated)).await;
    assert!(err.contains("outside"), "{err}");

    let mut lying = MHA_WEIGHTS.to_vec();
    lying[..8].copy_from_slice(&(MHA_WEIGHTS.len() as u64 * 2).to_le_bytes());
    let err = open_error(mha("lying header").with("model.safetensors", lying)).await;
    assert!(err.contains("past the end of the file"), "{err}");

    let dtype = edit_header(MHA_WEIGHTS, |h| h["model.norm.weight"]["dtype"] = "F8_E4M3".into());
    let err = open_error(mha("dtype").with("model.safetensors", dtype)).await;
    assert!(err.contains("unsupported dtype F8_E4M3"), "{err}");

    let config = String::from_utf8(MHA_CONFIG.to_vec())
        .unwrap()
        .replace("\"intermediate_size\": 64", "\"intermediate_size\": 72");
    let store = MemStore::new("config")
        .with("config.json", config.into_bytes())
        .with("model.safetensors", MHA_WEIGHTS.to_vec());
    let err = open_error(store).await;
    assert!(err.contains("does not match the config"), "{err}");

    let (untied, _) = fixture!(
        "tiny-untied",
        [
            "config.json",
            "model.safetensors.index.json",
            "model-00001-of-00003.safetensors",
            "model-00003-of-00003.safetensors"
        ]
    );
    let err = open_error(untied).await;
    assert!(err.contains("model-00002-of-00003.safetensors") && err.contains("listed in"), "{err}");
}

#[wasm_bindgen_test]
fn hugging_face_ids_and_urls_become_folder_urls() {
    let hf = "https://huggingface.co/Qwen/Qwen3-0.6B/resolve/main/";
    assert_eq!(remote_base("Qwen/Qwen3-0.6B").unwrap(), hf);
    assert_eq!(remote_base("  Qwen/Qwen3-0.6B ").unwrap(), hf);
    assert_eq!(remote_base("https://huggingface.co/Qwen/Qwen3-0.6B").unwrap(), hf);
    assert_eq!(remote_base("https://huggingface.co/Qwen/Qwen3-0.6B/tree/main").unwrap(), hf);
    assert_eq!(remote_base("https://huggingface.co/Qwen/Qwen3-0.6B/blob/main/config.json").unwrap(), hf);
    assert_eq!(remote_base("Qwen/Qwen3-0.6B@v1.0").unwrap(), "https://huggingface.co/Qwen/Qwen3-0.6B/resolve/v1.0/");
    assert_eq!(remote_base("https://example.com/models/tiny").unwrap(), "https://example.com/models/tiny/");
    assert_eq!(remote_base("https://example.com/m/config.json").unwrap(), "https://example.com/m/");
    assert_eq!(remote_base("./fixtures/tiny-mha").unwrap(), "./fixtures/tiny-mha/");
    for bad in ["", "Qwen3-0.6B", "a/b/c", "Qwen/../etc", "https://huggingface.co/Qwen", "owner/na me"] {
        let err = remote_base(bad).err().unwrap_or_else(|| panic!("{bad:?} accepted")).to_string();
        assert!(err.contains("Hugging Face repo id"), "{bad:?}: {err}");
    }
    assert_eq!(sources::base_label(hf), "Qwen/Qwen3-0.6B");
    assert_eq!(sources::base_label("https://huggingface.co/Qwen/Qwen3-0.6B/resolve/v2/"), "Qwen/Qwen3-0.6B@v2");
    assert_eq!(sources::base_label("http://127.0.0.1:8080/fixtures/tiny/"), "127.0.0.1:8080/fixtures/tiny");
}

#[wasm_bindgen_test]
fn picked_files_map_to_the_loaders_names() {
    let paths = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let folder = sources::pick_model_files(&paths(&[
        "Qwen3/README.md",
        "Qwen3/config.json",
        "Qwen3/model.safetensors",
        "Qwen3/tokenizer.json",
        "Qwen3/generation_config.json",
    ]))
    .unwrap();
    let names: Vec<&str> = folder.files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["config.json", "model.safetensors", "tokenizer.json"]);
    assert_eq!(folder.files[0].1, 1, "index into the input list");
    assert_eq!((folder.label.as_str(), folder.ignored), ("Qwen3", 2));

    let shards = sources::pick_model_files(&paths(&[
        "model-00002-of-00002.safetensors",
        "config.json",
        "model.safetensors.index.json",
        "model-00001-of-00002.safetensors",
    ]))
    .unwrap();
    assert_eq!(shards.files.len(), 4);
    assert_eq!(shards.label, "config.json + 3 files");

    let err = sources::pick_model_files(&paths(&["a/config.json", "b/config.json"])).unwrap_err().to_string();
    assert!(err.contains("two files named config.json"), "{err}");
    let err = sources::pick_model_files(&paths(&["model.safetensors"])).unwrap_err().to_string();
    assert!(err.contains("no config.json"), "{err}");
}

fn file(name: &str, bytes: &[u8]) -> web_sys::File {
    let parts = js_sys::Array::of1(&js_sys::Uint8Array::from(bytes));
    web_sys::File::new_with_u8_array_sequence(&parts, name).unwrap()
}

#[wasm_bindgen_test]
async fn picked_files_load_through_the_shared_loader() {
    let files = vec![
        ("tiny/config.json".to_string(), file("config.json", MHA_CONFIG)),
        ("tiny/notes.txt".to_string(), file("notes.txt", b"not a model file")),
        ("tiny/model.safetensors".to_string(), file("model.safetensors", MHA_WEIGHTS)),
    ];
    let (store, picked): (BlobStore, _) = tokenmeter::web::page::files::store(files).unwrap();
    assert_eq!((store.label.as_str(), picked.ignored), ("tiny", 1));
    let checkpoint = Checkpoint::open(&store).await.expect("a good model opens from Blobs");
    let gpu = Rc::new(Gpu::new().await.expect("WebGPU adapter"));
    let model = ForwardPass::load(gpu, &checkpoint, &EngineOptions::default(), &mut |_, _| {}).await.unwrap();
    let reference: Reference = serde_json::from_str(include_str!("../fixtures/tiny-mha/reference.json")).unwrap();
    let case = &reference.cases[0];
    let mut engine = Engine::new(model);
    let g = generate_greedy(&mut engine, &case.prompt_ids, case.max_new_tokens, &[], &mut |_, _| {}).await.unwrap();
    assert_eq!(g.tokens, case.tokens);
}

#[wasm_bindgen_test]
async fn cached_models_are_listed_opened_offline_and_deleted() {
    let origin = web_sys::window().unwrap().location().origin().unwrap();
    let base = format!("{origin}/tokenmeter-cache-test/tiny-mha/");
    cache::put_bytes(&format!("{base}config.json"), MHA_CONFIG).await.unwrap();
    cache::put_bytes(&format!("{base}model.safetensors"), MHA_WEIGHTS).await.unwrap();
    let listed = cache::list().await.unwrap();
    let entry = listed.iter().find(|c| c.base == base).unwrap_or_else(|| panic!("not listed: {listed:?}"));
    assert_eq!((entry.files, entry.bytes), (2, (MHA_CONFIG.len() + MHA_WEIGHTS.len()) as u64));

    // The index and tokenizer are not there: the test server answers 404, which is "no such file".
    let abort = web_sys::AbortController::new().unwrap();
    let store =
        RemoteStore::new(&base, abort.signal(), cache::load_manifest(), cache::StoreEvents::saving()).await.unwrap();
    let checkpoint = Checkpoint::open(&store).await.expect("opens from the cache");
    assert_eq!(checkpoint.config.vocab_size, 256);
    assert_eq!(store.downloaded(), 0, "nothing fetched for cached files");

    cache::delete(&base).await.unwrap();
    assert!(cache::list().await.unwrap().iter().all(|c| c.base != base), "still listed after delete");
    assert!(!cache::load_manifest().sizes.keys().any(|u| u.starts_with(&base)), "sizes kept after delete");
}

#[wasm_bindgen_test]
fn cache_contents_group_by_model_folder() {
    let hf = "https://huggingface.co/Qwen/Qwen3-0.6B/resolve/main/";
    let urls: Vec<String> =
        [format!("{hf}config.json"), format!("{hf}model.safetensors"), "http://127.0.0.1:1/m/config.json".to_string()]
            .into();
    let sizes =
        BTreeMap::from([(format!("{hf}model.safetensors"), 1_503_300_328u64), (format!("{hf}config.json"), 726)]);
    let grouped = sources::group_cached(&urls, &sizes);
    assert_eq!(grouped.len(), 2);
    assert_eq!((grouped[0].label.as_str(), grouped[0].files, grouped[0].bytes), ("127.0.0.1:1/m", 1, 0));
    assert_eq!((grouped[1].label.as_str(), grouped[1].files, grouped[1].bytes), ("Qwen/Qwen3-0.6B", 2, 1_503_301_054));
    assert_eq!(grouped[1].base, hf);
}

#[wasm_bindgen_test]
fn download_progress_reads_as_bytes_rate_and_eta() {
    let p = DownloadProgress {
        file: "model.safetensors".into(),
        file_bytes: 100_000_000,
        file_total: Some(1_100_000_000),
        bytes: 100_000_000,
        elapsed_s: 4.0,
    };
    assert_eq!(p.text(), "model.safetensors · 100.0 / 1100.0 MB · 25.0 MB/s · ETA 40 s");
    assert_eq!(p.fraction(), Some(100.0 / 1100.0));
    let unknown = DownloadProgress { file_total: None, elapsed_s: 0.0, ..p };
    assert_eq!(unknown.text(), "model.safetensors · 100.0 MB · 0.0 MB/s");
}

#[wasm_bindgen_test]
fn settings_round_trip_through_the_url() {
    tokenmeter::web::browser::replace_query(&[("rate", "1,2,inf".into()), ("requests", "8".into())]).unwrap();
    let settings = Settings::from_query();
    assert_eq!(settings.get(Field::Rate).get_untracked(), "1,2,inf");
    assert_eq!(settings.get(Field::Requests).get_untracked(), "8");
    assert_eq!(settings.get(Field::InputLen).get_untracked(), Field::InputLen.default_value());
    settings.get(Field::MaxBatch).set("4".into());
    let pairs = settings.changed();
    assert_eq!(pairs, [("rate", "1,2,inf".to_string()), ("requests", "8".into()), ("max_batch", "4".into())]);

    // Written back and read again: the same settings, and a sweep of three rates.
    tokenmeter::web::browser::replace_query(&pairs).unwrap();
    let again = Settings::from_query();
    assert_eq!(again.changed(), pairs);
    let config = settings::validate(
        &|f| Field::PAGE.contains(&f).then(|| again.get(f).get_untracked()),
        None,
        i18n::text(Lang::En),
    )
    .unwrap();
    assert_eq!(config.rates, [1.0, 2.0, f64::INFINITY]);
    assert_eq!(config.spec.num_requests, 8);

    again.get(Field::Rate).set("1,fast".into());
    let problems = settings::validate(
        &|f| Field::PAGE.contains(&f).then(|| again.get(f).get_untracked()),
        None,
        i18n::text(Lang::En),
    )
    .unwrap_err();
    assert_eq!(problems.iter().map(|(f, _)| *f).collect::<Vec<_>>(), [Field::Rate]);
    tokenmeter::web::browser::replace_query(&[]).unwrap();
}

#[wasm_bindgen_test]
fn engine_switches_parse_as_the_cli_and_bad_combinations_name_their_field() {
    use tokenmeter::engine::{Order, Policy, Speculation};
    use tokenmeter::gpu::WeightFormat;
    let with = |pairs: &[(Field, &str)]| {
        let pairs: Vec<(Field, String)> = pairs.iter().map(|(f, v)| (*f, v.to_string())).collect();
        settings::validate(
            &|f| {
                Some(
                    pairs
                        .iter()
                        .find(|(g, _)| *g == f)
                        .map_or_else(|| f.default_value().to_string(), |(_, v)| v.clone()),
                )
            },
            None,
            i18n::text(Lang::En),
        )
    };
    let config = with(&[
        (Field::Weights, "int4"),
        (Field::Speculate, "ngram:3"),
        (Field::Policy, "prefill-first"),
        (Field::PrefillChunk, "64"),
        (Field::PrefixCache, "on"),
        (Field::SharedPrefix, "100"),
    ])
    .unwrap();
    assert!(config.load.prefix_cache);
    assert_eq!(config.spec.shared_prefix, Some(tokenmeter::bench::SharedPrefix { len: 100, groups: 1 }));
    assert!(!with(&[]).unwrap().load.prefix_cache);
    assert_eq!(with(&[]).unwrap().spec.shared_prefix, None);
    assert_eq!(config.load.weights, WeightFormat::Int4);
    assert_eq!(config.load.speculation, Speculation::Ngram { k: 3 });
    assert_eq!(config.policy, Policy { order: Order::PrefillFirst, chunked_prefill: true, prefill_chunk: Some(64) });
    assert_eq!(with(&[]).unwrap().policy, Policy::default());

    let fields = |pairs: &[(Field, &str)]| with(pairs).unwrap_err().into_iter().map(|(f, _)| f).collect::<Vec<_>>();
    assert_eq!(fields(&[(Field::Speculate, "ngram:99")]), [Field::Speculate]);
    assert_eq!(fields(&[(Field::Speculate, "draft:/models/Qwen3-0.6B:4")]), [Field::Speculate], "one model per page");
    // A shared prefix must be shorter than the shortest prompt (128 tokens by default).
    assert_eq!(fields(&[(Field::SharedPrefix, "128")]), [Field::SharedPrefix]);
    assert_eq!(fields(&[(Field::SharedPrefix, "x")]), [Field::SharedPrefix]);
    assert_eq!(fields(&[(Field::ChunkedPrefill, "off"), (Field::PrefillChunk, "64")]), [Field::PrefillChunk]);
    // The price per hour, as the CLI's --cost-per-hour: empty is none.
    assert_eq!(with(&[]).unwrap().cost_per_hour, None);
    assert_eq!(with(&[(Field::CostPerHour, " 2.5 ")]).unwrap().cost_per_hour, Some(2.5));
    assert_eq!(fields(&[(Field::CostPerHour, "-1")]), [Field::CostPerHour]);
    assert_eq!(fields(&[(Field::CostPerHour, "cheap")]), [Field::CostPerHour]);
    // Conversations and a warm-up, as the CLI's --turns, --think-time-s, --warmup-requests.
    let talk = with(&[(Field::Turns, "2:4"), (Field::ThinkTime, "1.5"), (Field::WarmupRequests, "4")]).unwrap();
    let c = talk.spec.conversations.expect("turns make conversations");
    assert_eq!((c.turns.min, c.turns.max, c.think_time_s), (2, 4, 1.5));
    assert!(!talk.spec.saturation_stop, "the stop needs arrival times, which later turns lack");
    assert_eq!(talk.phases.warmup_requests, 4);
    assert!(with(&[]).unwrap().spec.conversations.is_none() && with(&[]).unwrap().phases.is_none());
    assert_eq!(fields(&[(Field::Turns, "0")]), [Field::Turns]);
    assert_eq!(fields(&[(Field::Turns, "3"), (Field::ThinkTime, "-1")]), [Field::ThinkTime]);
    assert_eq!(fields(&[(Field::Turns, "3"), (Field::Arrival, "sequential")]), [Field::Turns]);
    assert_eq!(fields(&[(Field::WarmupRequests, "32")]), [Field::WarmupRequests], "leaves none of 32");
    // Warm-up and cool-down by arrival time, as the CLI's --warmup-s and --cooldown-s.
    let phased = with(&[(Field::WarmupS, " 2.5 "), (Field::CooldownS, "1")]).unwrap();
    assert_eq!((phased.phases.warmup_s, phased.phases.cooldown_s), (2.5, 1.0));
    assert_eq!(fields(&[(Field::WarmupS, "-1")]), [Field::WarmupS]);
    assert_eq!(fields(&[(Field::CooldownS, "soon")]), [Field::CooldownS]);
    // Whole prefills of 600 + 63 tokens cannot fit 512 tokens per step: the engine's own rule.
    let problems = with(&[(Field::ChunkedPrefill, "off"), (Field::InputLen, "600")]).unwrap_err();
    assert_eq!(problems.iter().map(|(f, _)| *f).collect::<Vec<_>>(), [Field::ChunkedPrefill]);
    assert!(problems[0].1.contains("max_batched_tokens 512"), "{}", problems[0].1);
    assert_eq!(tokenmeter::web::page::verdict::metric_label("ttft_p99_ms"), "TTFT p99 (ms)");
}

/// Mounts `view` in a fresh element with the page's language context; returns the element.
fn mount<V: IntoView + 'static>(view: impl FnOnce() -> V + 'static) -> web_sys::HtmlElement {
    let document = web_sys::window().unwrap().document().unwrap();
    let parent: web_sys::HtmlElement = document.create_element("div").unwrap().unchecked_into();
    document.body().unwrap().append_child(&parent).unwrap();
    let handle = leptos::mount::mount_to(parent.clone(), move || {
        provide_context(UiLang(RwSignal::new(Lang::En)));
        view()
    });
    handle.forget();
    parent
}

#[wasm_bindgen_test]
async fn error_text_from_files_is_never_markup() {
    let hostile = "<img src=x onerror=alert(1)> <b>model</b>.safetensors";
    let message = RwSignal::new(Some(hostile.to_string()));
    let root = mount(move || {
        view! {
            <tokenmeter::web::page::model_panel::ErrorLine
                prefix=Signal::derive(|| "Could not load the model")
                message=message.into()
                testid="model-error"
            />
        }
    });
    let line = root.query_selector("[data-testid=model-error]").unwrap().expect("the error is shown");
    assert_eq!(line.text_content().unwrap(), format!("Could not load the model: {hostile}"));
    assert!(root.query_selector("img, b").unwrap().is_none(), "markup was rendered: {}", root.inner_html());
    message.set(None);
    leptos::task::tick().await;
    assert!(root.query_selector("[data-testid=model-error]").unwrap().is_none(), "cleared error still shown");
}

/// Rates read as people write them wherever the page shows one: a searched rate is not
/// 4.512737200773266 req/s.
#[wasm_bindgen_test]
fn rates_are_shown_with_at_most_three_decimals() {
    use tokenmeter::web::page::sweep::rate_text;
    let shown: Vec<String> = [2.0, 0.25, 4.512737200773266, 100.0, 0.0, 0.004, f64::INFINITY].map(rate_text).to_vec();
    assert_eq!(shown, ["2", "0.25", "4.513", "100", "0", "4.0e-3", "inf"]);
}

#[wasm_bindgen_test]
async fn sweep_view_marks_the_knee() {
    use tokenmeter::web::page::sweep::{SweepPanel, SweepView};
    let result = |throughput: f64, ttft_p99: f64| {
        let mut metrics = tokenmeter::bench::summarize(&[], &[], None, 0.25);
        metrics.output_throughput = throughput;
        metrics.ttft_ms.p99 = ttft_p99;
        tokenmeter::bench::BenchResult {
            decided: None,
            config: tokenmeter::bench::RunConfig::default(),
            metrics,
            diagnosis: None,
            baseline: None,
            requests: vec![],
            steps: vec![],
            saturation: None,
            server_metrics: None,
            gpu_metrics: None,
            validity: None,
        }
    };
    let mut view = SweepView::new(vec![1.0, 2.0, 4.0, f64::INFINITY], None);
    for (rate, (tp, ttft)) in
        [1.0, 2.0, 4.0, f64::INFINITY].into_iter().zip([(50.0, 30.0), (98.0, 40.0), (101.0, 300.0), (102.0, 900.0)])
    {
        view.push(rate, &result(tp, ttft));
    }
    let sweep = RwSignal::new(Some(view));
    let root = mount(move || view! { <SweepPanel sweep=sweep /> });
    leptos::task::tick().await;
    assert_eq!(root.query_selector_all(".sweep-dot").unwrap().length(), 4);
    assert!(root.query_selector("[data-testid=sweep-knee]").unwrap().is_some(), "no knee marker");
    let knee = root.query_selector("[data-testid=sweep-knee-text]").unwrap().unwrap().text_content().unwrap();
    assert!(knee.contains("Rate 2 req/s") && knee.contains("stops rising"), "{knee}");
    assert_eq!(root.query_selector("tr.knee td").unwrap().unwrap().text_content().unwrap(), "2");
}

#[wasm_bindgen_test]
fn live_charts_change_one_chart_per_frame() {
    // During a run each animation frame redraws one chart (a frame that redrew all five was a
    // long task under load): a snapshot with three changed charts takes three frames, in order.
    use tokenmeter::web::page::run::show_one_chart;
    use tokenmeter::web::protocol::charts::{BatchPoint, ChartData, Point};
    let p = |x: f64| vec![Point { x, y: x }];
    let mut shown = ChartData { ttft: p(1.0), tpot: p(1.0), throughput: p(1.0), ..ChartData::default() };
    let new = ChartData {
        ttft: p(1.0),
        tpot: p(2.0),
        throughput: p(1.0),
        batch: vec![BatchPoint { t: 1.0, running: 2.0, waiting: 0.0 }],
        kv: p(3.0),
        ..ChartData::default()
    };
    let mut frames = Vec::new();
    loop {
        let before = shown.clone();
        let more = show_one_chart(&mut shown, &new);
        let changed = [
            before.ttft != shown.ttft,
            before.tpot != shown.tpot,
            before.throughput != shown.throughput,
            before.batch != shown.batch,
            before.kv != shown.kv,
        ];
        assert_eq!(changed.iter().filter(|&&c| c).count(), 1, "one chart per frame: {changed:?}");
        frames.push(changed.iter().position(|&c| c).unwrap());
        if !more {
            break;
        }
        assert!(frames.len() < 5, "more than five frames");
    }
    assert_eq!(frames, [1, 3, 4]);
    assert_eq!(shown, new);
    assert!(!show_one_chart(&mut shown, &new), "nothing left once shown");
}

// Remote targets: the key stays in memory, the HTTP/1.1 warning, and (with a peer) a round trip.

const SECRET: &str = "sk-tokenmeter-test-secret-4242";

fn remote_spec(arrival: &str, rate: f64, concurrency: usize) -> tokenmeter::bench::WorkloadSpec {
    tokenmeter::bench::WorkloadSpec {
        cancel: None,
        arrival: arrival.parse().unwrap(),
        rate,
        concurrency,
        num_requests: 32,
        burstiness: 1.0,
        span: tokenmeter::bench::ArrivalSpan::Drawn,
        input_len: "128".parse().unwrap(),
        output_len: "64".parse().unwrap(),
        seed: 0,
        dataset: None,
        max_concurrency: None,
        saturation_stop: false,
        shared_prefix: None,
        conversations: None,
    }
}

#[wasm_bindgen_test]
fn http1_warning_when_the_workload_outgrows_six_connections() {
    use tokenmeter::web::page::target::connection_warning;
    let http = "http://127.0.0.1:8080/v1";
    let https = "https://api.example.com/v1";
    assert_eq!(connection_warning(http, &remote_spec("concurrency", 1.0, 8)), Some(8));
    assert_eq!(connection_warning(http, &remote_spec("concurrency", 1.0, 6)), None);
    assert_eq!(connection_warning(https, &remote_spec("concurrency", 1.0, 64)), None, "TLS may be HTTP/2");
    assert_eq!(connection_warning(http, &remote_spec("sequential", 1.0, 64)), None);
    // Open loops: rate × the expected duration of one request, at most the number of requests.
    let spec = remote_spec("poisson", 1.0, 1);
    let request_s = tokenmeter::web::page::target::expected_request_s(&spec);
    assert!(request_s > 0.5, "{request_s}");
    assert_eq!(connection_warning(http, &spec), None);
    assert_eq!(connection_warning(http, &remote_spec("poisson", 100.0, 1)), Some(32));
    assert_eq!(connection_warning(http, &remote_spec("constant", f64::INFINITY, 1)), Some(32));
}

#[wasm_bindgen_test]
async fn the_warning_shows_in_the_target_card() {
    use tokenmeter::web::page::target::{TargetPanel, TargetSettings};
    let target = TargetSettings::from_query();
    target.kind.set("remote".into());
    let spec = RwSignal::new(Some(remote_spec("concurrency", 1.0, 16)));
    let engine = RwSignal::new(true);
    let root = mount(move || {
        view! { <TargetPanel target=target spec=spec.into() locked=Signal::derive(|| false) engine=engine.into() /> }
    });
    leptos::task::tick().await;
    let engine_off = || {
        let option = root.query_selector("[data-testid=target-kind] option[value=browser]").unwrap().unwrap();
        option.has_attribute("disabled")
    };
    assert!(!engine_off(), "the engine target is off with WebGPU");
    // A browser without WebGPU: the engine cannot be picked.
    engine.set(false);
    leptos::task::tick().await;
    assert!(engine_off(), "the engine target can be picked without WebGPU");
    let warning = root.query_selector("[data-testid=http1-warning]").unwrap().expect("the warning is shown");
    let text = warning.text_content().unwrap();
    assert!(text.contains("16 requests") && text.contains("HTTP/2") && text.contains("CLI"), "{text}");
    target.base_url.set("https://api.example.com/v1".into());
    leptos::task::tick().await;
    assert!(root.query_selector("[data-testid=http1-warning]").unwrap().is_none(), "https still warned");
    let key: web_sys::HtmlInputElement =
        root.query_selector("[data-testid=target-api-key]").unwrap().unwrap().unchecked_into();
    assert_eq!(key.type_(), "password");
}

/// Three or more words of Latin letters in a row (punctuation at their ends aside), with nothing
/// but ASCII between them: an English sentence or phrase. Flags, numbers, units and names such as
/// `ngram:K`, `int8` or `TTFT` alone are not one, nor are ASCII words with Chinese between them.
fn english_phrase(text: &str) -> Option<String> {
    let word = |w: &&str| {
        let core = w.trim_matches(|c: char| c.is_ascii_punctuation());
        !core.is_empty() && core.chars().all(|c| c.is_ascii_alphabetic())
    };
    text.split(|c: char| !c.is_ascii()).find_map(|run| {
        let words: Vec<&str> = run.split_whitespace().collect();
        words.windows(3).find(|w| w.iter().all(word)).map(|w| w.join(" "))
    })
}

#[wasm_bindgen_test]
fn a_planted_english_phrase_is_found() {
    assert_eq!(english_phrase("速率 2：the queue grew 了").as_deref(), Some("the queue grew"));
    assert_eq!(english_phrase("应为 ngram:K、draft:MODEL:K（K 为 1 到 16）或 off"), None);
    assert_eq!(english_phrase("TTFT 与 TPOT 的 SLO"), None, "words with Chinese between them");
}

/// The Chinese page shows no English sentence where the library words a message: the settings'
/// rules (the SLO parser's, the phases', the engine's scheduling policy's, the speculation
/// setting's), the target card's URL check, the worker's refusals, and why a run never reached a
/// steady state.
#[wasm_bindgen_test]
async fn the_chinese_page_words_rules_refusals_and_the_steady_state_in_chinese() {
    use tokenmeter::bench::base::rules::Rule;
    use tokenmeter::bench::measure::steady::{NoSteadyState, SteadyState};
    use tokenmeter::web::page::run::refused_text;
    use tokenmeter::web::page::target::{TargetPanel, TargetSettings};
    use tokenmeter::web::protocol::Refused;
    let zh = i18n::text(Lang::Zh);
    let mut shown: Vec<(String, String)> = Vec::new();
    let cases: [&[(Field, &str)]; 6] = [
        &[(Field::SloTtft, "fast")],
        &[(Field::WarmupRequests, "32")],
        &[(Field::WarmupS, "-1")],
        &[(Field::ChunkedPrefill, "off"), (Field::InputLen, "600")],
        &[(Field::Speculate, "ngram:99")],
        &[(Field::Weights, "fp8")],
    ];
    for pairs in cases {
        let value = |f: Field| {
            Some(
                pairs
                    .iter()
                    .find(|(g, _)| *g == f)
                    .map_or_else(|| f.default_value().to_string(), |(_, v)| v.to_string()),
            )
        };
        let problems = settings::validate(&value, None, zh).expect_err("each case breaks a rule");
        shown.extend(problems.into_iter().map(|(f, text)| (format!("{pairs:?} on {f:?}"), text)));
    }
    // The worker's refusals, as the page words them.
    let context = Rule::Context { input: 4090, output: 16, max_position: 4096 }.text(Lang::Zh);
    let refusals = [
        Refused::Problems { b: true, problems: vec![(Field::InputLen, context)] },
        Refused::WrongTarget,
        Refused::NeedsReload,
    ];
    for refused in refusals {
        let label = format!("{refused:?}");
        shown.push((label, refused_text(refused, zh).expect("a refusal worded")));
    }
    // A result saved with the English reason beside the reason as data: the data is worded.
    let steady = SteadyState {
        from_s: 1.0,
        to_s: 9.0,
        level: 3.0,
        requests: 20,
        never: Some("the queue grew while requests arrived".into()),
        never_why: Some(NoSteadyState::QueueGrew { rise: 12.0, from_s: 1.0, last_s: 9.0 }),
        summary: None,
    };
    shown.push(("never steady".into(), steady.never_text(Lang::Zh).expect("never reached")));
    // The target card's URL check, on the page in Chinese.
    let target = TargetSettings::from_query();
    target.kind.set("remote".into());
    target.base_url.set("ftp://host/v1".into());
    let spec = RwSignal::new(None);
    let root = mount(move || {
        use_context::<UiLang>().expect("the page's language").0.set(Lang::Zh);
        view! { <TargetPanel target=target spec=spec.into() locked=Signal::derive(|| false) engine=Signal::derive(|| true) /> }
    });
    leptos::task::tick().await;
    let url = root.query_selector(".field-error").unwrap().expect("the URL's problem is shown").text_content().unwrap();
    shown.push(("the target card's URL".into(), url));
    for (source, text) in &shown {
        assert!(text.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)), "{source}: no Chinese in {text:?}");
        assert_eq!(english_phrase(text), None, "{source}: English on the Chinese page: {text:?}");
    }
}

#[wasm_bindgen_test]
async fn the_api_key_is_never_in_the_link_the_history_or_a_record() {
    use tokenmeter::remote::browser::{Client, RunOptions};
    use tokenmeter::web::page::target::TargetSettings;
    let target = TargetSettings::from_query();
    target.kind.set("remote".into());
    target.base_url.set("http://127.0.0.1:9/v1".into());
    target.model.set("qwen3-tiny".into());
    target.api_key.set(SECRET.into());

    // The link the page writes.
    let pairs = target.query_pairs();
    assert!(pairs.iter().any(|(k, v)| *k == "endpoint" && v == "http://127.0.0.1:9/v1"), "{pairs:?}");
    tokenmeter::web::browser::replace_query(&pairs).unwrap();
    let href = web_sys::window().unwrap().location().href().unwrap();
    assert!(!href.contains(SECRET) && !href.contains("sk-"), "{href}");
    assert_eq!(TargetSettings::from_query().api_key.get_untracked(), "", "a key read back from the link");
    tokenmeter::web::browser::replace_query(&[]).unwrap();

    // A run against a closed port: every request fails, as data, and no record carries the key.
    let endpoint = target.runnable(i18n::text(Lang::En)).unwrap();
    assert_eq!(endpoint.describe()["api_key"], "set (not recorded)");
    let plan = tokenmeter::bench::plan(&tokenmeter::bench::WorkloadSpec {
        num_requests: 3,
        ..remote_spec("concurrency", 1.0, 2)
    })
    .unwrap();
    let prompt = |p: &tokenmeter::bench::PlannedRequest| Ok(tokenmeter::remote::Prompt::Ids(vec![1; p.prompt_len]));
    let requests = tokenmeter::remote::requests(&plan, &prompt).unwrap();
    let options = RunOptions { ignore_eos: true, timeout_s: 20.0, closed_loop: Some(2), ..RunOptions::default() };
    let client = Client::new(endpoint.clone());
    let records = client.run(&requests, &options, Rc::new(|_, _| {}), Rc::new(std::cell::Cell::new(false))).await;
    assert_eq!(records.len(), 3);
    for r in &records {
        assert_eq!(r.error_kind(), Some("connect"), "{:?}", r.error);
        assert!(r.scheduled_s.is_some_and(|s| s >= r.arrival_s), "fetch() before its arrival");
    }
    let metrics = tokenmeter::bench::summarize(&records, &[], None, 0.25);
    let result = tokenmeter::bench::BenchResult {
        decided: None,
        config: tokenmeter::bench::RunConfig { target: endpoint.describe(), ..Default::default() },
        metrics,
        diagnosis: None,
        baseline: None,
        requests: records,
        steps: vec![],
        saturation: None,
        server_metrics: None,
        gpu_metrics: None,
        validity: None,
    };
    let entry = tokenmeter::web::page::history::Entry {
        time_ms: 0.0,
        name: "remote".into(),
        result,
        search: None,
        runs: Vec::new(),
        parts: None,
    };
    let saved = serde_json::to_string(&entry).unwrap();
    assert!(!saved.contains(SECRET), "the key in a history entry");
    let again: tokenmeter::web::page::history::Entry = serde_json::from_str(&saved).unwrap();
    assert_eq!(again.result.requests.len(), 3, "a remote run reads back from the history");
    let csv = tokenmeter::bench::present::report::csv(&again.result.requests);
    assert!(!csv.contains(SECRET));
    assert!(!format!("{endpoint:?}").contains(SECRET), "the key in Debug output");
    let models = client.models(10.0).await.unwrap_err().to_string();
    assert!(models.contains("/v1/models") && !models.contains(SECRET), "{models}");
}

/// `scripts/test` starts llama-server on the tiny GGUF fixture and sets this at compile time.
const PEER_URL: Option<&str> = option_env!("TOKENMETER_PEER_URL");

#[wasm_bindgen_test]
async fn a_real_server_round_trip_from_the_browser() {
    use tokenmeter::remote::browser::{Client, RunOptions};
    use tokenmeter::remote::{Api, ApiKey, BaseUrl, Endpoint};
    let Some(url) = PEER_URL else {
        // scripts/test sets both: there, a missing peer is a failure, not a skip.
        assert!(option_env!("TOKENMETER_REQUIRE_PEER").is_none(), "TOKENMETER_PEER_URL not set at build time");
        web_sys::console::log_1(&"TOKENMETER_PEER_URL not set at build time: no round trip".into());
        return;
    };
    let endpoint = Endpoint {
        base_url: BaseUrl::parse(url).unwrap(),
        model: String::new(),
        api: Api::Completions,
        // llama-server without --api-key ignores it; it still has to pass CORS.
        api_key: ApiKey::new(SECRET.into()),
        thinking: None,
    };
    let models = Client::new(endpoint.clone()).models(30.0).await.unwrap();
    assert_eq!(models, ["qwen3-tiny"]);
    for api in [Api::Completions, Api::Chat] {
        let client = Client::new(Endpoint { model: models[0].clone(), api, ..endpoint.clone() });
        let spec = tokenmeter::bench::WorkloadSpec {
            num_requests: 6,
            input_len: "16".parse().unwrap(),
            output_len: "8".parse().unwrap(),
            ..remote_spec("concurrency", 1.0, 3)
        };
        let plan = tokenmeter::bench::plan(&spec).unwrap();
        let prompt = |p: &tokenmeter::bench::PlannedRequest| {
            Ok(match api {
                Api::Completions => tokenmeter::remote::Prompt::Ids(vec![100; p.prompt_len]),
                Api::Chat => tokenmeter::remote::Prompt::Text("hello ".repeat(p.prompt_len)),
            })
        };
        let requests = tokenmeter::remote::requests(&plan, &prompt).unwrap();
        let options = RunOptions { ignore_eos: true, timeout_s: 60.0, closed_loop: Some(3), ..RunOptions::default() };
        let progress = Rc::new(std::cell::Cell::new(0));
        let seen = progress.clone();
        let records = client
            .run(&requests, &options, Rc::new(move |n, _| seen.set(n)), Rc::new(std::cell::Cell::new(false)))
            .await;
        assert_eq!((records.len(), progress.get()), (6, 6));
        for r in &records {
            assert!(r.succeeded(), "{api:?}: {:?}", r.error);
            assert_eq!(r.output_len, 8, "{api:?}: ignore_eos asks for exactly 8 tokens");
            assert!(r.ttft_s().is_some_and(|t| t > 0.0) && r.finish_s >= r.first_token_s);
        }
        let metrics = tokenmeter::bench::summarize(&records, &[], None, 0.25);
        assert_eq!(metrics.completed, 6);
    }

    // Conversations over chat: a later turn is sent after the turn before's reply, and carries it
    // (the server counts the growing history).
    let client = Client::new(Endpoint { model: models[0].clone(), api: Api::Chat, ..endpoint.clone() });
    let spec = tokenmeter::bench::WorkloadSpec {
        num_requests: 6,
        input_len: "12".parse().unwrap(),
        output_len: "8".parse().unwrap(),
        conversations: Some(tokenmeter::bench::Conversations {
            turns: "3".parse().unwrap(),
            think_time_s: 0.02,
            from_dataset: false,
        }),
        ..remote_spec("poisson", 20.0, 1)
    };
    let plan = tokenmeter::bench::plan(&spec).unwrap();
    let turns = tokenmeter::bench::traffic::workload::conversation_turns(&spec).unwrap();
    let prompt =
        |p: &tokenmeter::bench::PlannedRequest| Ok(tokenmeter::remote::Prompt::Text("hello ".repeat(p.prompt_len)));
    let requests = tokenmeter::remote::turn_requests(&plan, &turns, &prompt).unwrap();
    let options = RunOptions { ignore_eos: true, timeout_s: 60.0, ..RunOptions::default() };
    let records = client.run(&requests, &options, Rc::new(|_, _| {}), Rc::new(std::cell::Cell::new(false))).await;
    assert_eq!(records.len(), 6);
    for (r, t) in records.iter().zip(&turns) {
        assert!(r.succeeded(), "{:?}", r.error);
        assert_eq!((r.session, r.turn), (Some(t.session), Some(t.turn)));
        if let Some(prev) = t.prev {
            let before = &records[prev];
            assert!(r.arrival_s >= before.finish_s.unwrap() + 0.0, "turn {} due before its reply", t.turn);
            let (now, then) = (r.server_prompt_len.unwrap(), before.server_prompt_len.unwrap());
            assert!(now > then + 8 + 8, "the history grew: {now} after {then}");
        }
    }

    // A request past its timeout is aborted and recorded as a timeout, with what had arrived.
    let client = Client::new(Endpoint { model: models[0].clone(), ..endpoint.clone() });
    let long = tokenmeter::remote::RemoteRequest {
        cancel_after_s: None,
        id: 0,
        arrival_s: Some(0.0),
        prompt: tokenmeter::remote::Prompt::Ids(vec![100; 16]),
        prompt_len: 16,
        max_tokens: 900,
        turn: None,
    };
    let options = RunOptions { ignore_eos: true, timeout_s: 0.3, closed_loop: None, ..RunOptions::default() };
    let records = client.run(&[long], &options, Rc::new(|_, _| {}), Rc::new(std::cell::Cell::new(false))).await;
    assert_eq!(records[0].error_kind(), Some("timeout"), "{:?}", records[0].error);
    assert!(records[0].output_len < 900);
}

/// The browser client's open loop against the peer: `max_concurrency` holds a due request until a
/// slot frees (each request is sent only after the one before it ended), and a rate the server
/// cannot sustain is ended early by the saturation stop, with what was not yet due never sent.
#[wasm_bindgen_test]
async fn the_browser_client_caps_concurrency_and_stops_at_saturation() {
    use tokenmeter::remote::browser::{Client, RunOptions};
    use tokenmeter::remote::{Api, BaseUrl, Endpoint, Prompt, RemoteRequest};
    let Some(url) = PEER_URL else {
        assert!(option_env!("TOKENMETER_REQUIRE_PEER").is_none(), "TOKENMETER_PEER_URL not set at build time");
        return;
    };
    let endpoint = Endpoint {
        base_url: BaseUrl::parse(url).unwrap(),
        model: String::new(),
        api: Api::Completions,
        api_key: None,
        thinking: None,
    };
    let client = Client::new(endpoint);
    let request = |id: u64, arrival_s: f64, max_tokens: usize| RemoteRequest {
        cancel_after_s: None,
        id,
        arrival_s: Some(arrival_s),
        prompt: Prompt::Ids(vec![100; 8]),
        prompt_len: 8,
        max_tokens,
        turn: None,
    };
    let no_cancel = || Rc::new(std::cell::Cell::new(false));

    // Four requests due at once, one slot: sent one after another, never overlapping. The page
    // scrapes the peer's /metrics (llama-server --metrics) meanwhile, from the start to the end.
    let requests: Vec<RemoteRequest> = (0..4).map(|i| request(i, 0.0, 8)).collect();
    let metrics_url = tokenmeter::bench::measure::server_metrics::default_url(url);
    let options = RunOptions {
        ignore_eos: true,
        timeout_s: 60.0,
        max_concurrency: Some(1),
        server_metrics: Some(metrics_url.clone()),
        ..RunOptions::default()
    };
    let mut records = client.run(&requests, &options, Rc::new(|_, _| {}), no_cancel()).await;
    assert_eq!(records.len(), 4);
    let scraped = client.take_server_metrics().expect("the run scraped the server's /metrics");
    assert_eq!(scraped.url, metrics_url);
    assert!(scraped.samples.len() >= 2, "{scraped:?}");
    assert_eq!(scraped.sources.get("running").map(String::as_str), Some("llamacpp:requests_processing"), "{scraped:?}");
    assert!(client.take_server_metrics().is_none(), "taken once");
    records.sort_by(|a, b| a.sent_s.partial_cmp(&b.sent_s).unwrap());
    for pair in records.windows(2) {
        assert!(pair[0].succeeded() && pair[1].succeeded(), "{:?} {:?}", pair[0].error, pair[1].error);
        assert!(
            pair[1].sent_s.unwrap() >= pair[0].finish_s.unwrap(),
            "request {} sent at {:?}, before request {} ended at {:?}",
            pair[1].id,
            pair[1].sent_s,
            pair[0].id,
            pair[0].finish_s
        );
    }
    assert!(client.take_saturation().is_none(), "no saturation stop was asked for");

    // 200 requests/s of 96 tokens each for 12 s: far past what the peer (4 slots, 1 thread) serves.
    let rate = 200.0;
    let requests: Vec<RemoteRequest> = (0..2400).map(|i| request(i, i as f64 / rate, 96)).collect();
    let options = RunOptions { ignore_eos: true, timeout_s: 60.0, saturation_stop: true, ..RunOptions::default() };
    let records = client.run(&requests, &options, Rc::new(|_, _| {}), no_cancel()).await;
    assert_eq!(records.len(), requests.len(), "one record per request, sent or not");
    // Those never sent have no arrival time (the session drops them).
    let records: Vec<_> = records.into_iter().filter(|r| r.arrival_s.is_finite()).collect();
    let verdict = client.take_saturation().expect("a rate the server cannot sustain is stopped");
    assert!(verdict.at_s >= 5.0 && verdict.at_s < 12.0, "{verdict:?}");
    assert!(verdict.reason.starts_with("saturated"), "{}", verdict.reason);
    // Nothing due after the stop was sent (the watcher looks every 50 ms).
    assert!(records.len() < requests.len() && records.len() as f64 <= (verdict.at_s + 0.2) * rate, "{}", records.len());
    assert!(records.iter().all(|r| r.arrival_s <= verdict.at_s + 0.2));
    assert!(client.take_saturation().is_none(), "taken once");
}

// The per-request timeline: 1,000 requests redraw as five paths, fast enough to stay live.

#[wasm_bindgen_test]
async fn a_thousand_request_timeline_redraws_quickly() {
    use tokenmeter::bench::present::timeline::Timeline;
    use tokenmeter::bench::{RequestRecord, StepSample};
    use tokenmeter::web::page::timeline::{TimelineCard, REDRAW_MS};
    // 1,000 requests over 20 s: each waits, prefills and decodes; some are preempted.
    let records: Vec<RequestRecord> = (0..1000)
        .map(|i| {
            let arrival = i as f64 * 0.02;
            let first = arrival + 0.3;
            let tokens: Vec<f64> = (0..64).map(|k| first + k as f64 * 0.05).collect();
            RequestRecord {
                id: i,
                arrival_s: arrival,
                scheduled_s: Some(arrival + 0.1),
                first_token_s: Some(first),
                finish_s: tokens.last().copied(),
                output_len: tokens.len(),
                token_times_s: tokens,
                preempted_s: if i % 50 == 0 { vec![first + 1.0] } else { vec![] },
                ..RequestRecord::default()
            }
        })
        .collect();
    let steps: Vec<StepSample> = (0..8000)
        .map(|i| StepSample {
            t_s: i as f64 * 0.003,
            duration_s: 0.003,
            running: 16,
            waiting: 4,
            batched_tokens: 16,
            kv_blocks_used: 10,
            kv_blocks_total: 64,
            ..Default::default()
        })
        .collect();
    let data = RwSignal::new(Timeline::default());
    let root = mount(move || view! { <TimelineCard data=data.into() /> });
    leptos::task::tick().await;
    let performance = web_sys::window().unwrap().performance().unwrap();
    let (mut geometry_ms, mut redraw_ms) = (Vec::new(), Vec::new());
    for k in 0..8 {
        // A live snapshot: unfinished requests reach `now`, so every path changes.
        let now = 18.0 + k as f64 * 0.5;
        let live: Vec<RequestRecord> = records
            .iter()
            .map(|r| if r.finish_s.unwrap() > now { RequestRecord { finish_s: None, ..r.clone() } } else { r.clone() })
            .collect();
        let t0 = performance.now();
        let timeline = Timeline::draw(&live, &steps, Some(now), false);
        let t1 = performance.now();
        data.set(timeline);
        leptos::task::tick().await;
        // Force style and layout of the new paths, as the next paint would.
        let height = root.get_bounding_client_rect().height();
        let t2 = performance.now();
        assert!(height > 0.0);
        geometry_ms.push(t1 - t0);
        redraw_ms.push(t2 - t1);
        // Past the throttle, so that the next set draws at once.
        tokenmeter::clock::sleep_s(REDRAW_MS / 1000.0 + 0.02).await;
    }
    let card = root.query_selector("[data-testid=timeline]").unwrap().expect("the timeline card");
    for (attribute, want) in
        [("data-rows", "1000"), ("data-waiting", "1000"), ("data-prefill", "1000"), ("data-decode", "1000")]
    {
        assert_eq!(card.get_attribute(attribute).as_deref(), Some(want), "{attribute}");
    }
    assert_eq!(card.get_attribute("data-marks").as_deref(), Some("20"));
    // One path per phase, the marks, the cancel marks and the step ticks, and the steady band (the
    // cancel marks and the band empty here: nothing cancelled, still running).
    assert_eq!(card.get_attribute("data-cancelled").as_deref(), Some("0"));
    assert_eq!(root.query_selector_all("svg.timeline path").unwrap().length(), 7, "one path per part");
    let decode = root.query_selector("path.tl-decode").unwrap().unwrap().get_attribute("d").unwrap();
    assert_eq!(decode.matches('M').count(), 1000);
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (geometry, redraw) = (median(&mut geometry_ms), median(&mut redraw_ms));
    console_log!(
        "timeline of 1,000 requests: geometry {geometry:.1} ms, DOM update + layout {redraw:.1} ms (medians of 8)"
    );
    // A frame is 16 ms; the timeline redraws every 250 ms at most, so 100 ms would already stutter.
    assert!(geometry + redraw < 100.0, "a redraw takes {geometry:.1} + {redraw:.1} ms");
}

#[wasm_bindgen_test]
async fn the_live_timeline_is_throttled_but_ends_on_the_newest() {
    use tokenmeter::bench::present::timeline::Timeline;
    use tokenmeter::bench::RequestRecord;
    use tokenmeter::web::page::timeline::{TimelineCard, REDRAW_MS};
    let request = |n: u64| RequestRecord { id: n, arrival_s: 0.0, ..RequestRecord::default() };
    let data = RwSignal::new(Timeline::default());
    let root = mount(move || view! { <TimelineCard data=data.into() /> });
    let rows = || root.query_selector("[data-testid=timeline]").unwrap().unwrap().get_attribute("data-rows").unwrap();
    data.set(Timeline::draw(&[request(0)], &[], Some(1.0), false));
    leptos::task::tick().await;
    assert_eq!(rows(), "1");
    // Two more snapshots at once: held back, then the newest shows.
    data.set(Timeline::draw(&[request(0), request(1)], &[], Some(1.1), false));
    data.set(Timeline::draw(&[request(0), request(1), request(2)], &[], Some(1.2), false));
    leptos::task::tick().await;
    assert_eq!(rows(), "1", "redrawn before the throttle allowed");
    tokenmeter::clock::sleep_s(REDRAW_MS / 1000.0 + 0.05).await;
    leptos::task::tick().await;
    assert_eq!(rows(), "3", "the newest snapshot never showed");
}

// The engine worker's messages: what crosses between the page and the worker arrives intact.

/// A run on a fixture (real records and steps), its live charts and its result, and a server
/// command with its key and a dataset, each encoded as the page and the worker send them and
/// decoded on the other side: equal to what was sent.
#[wasm_bindgen_test]
async fn the_page_and_its_engine_worker_exchange_messages_intact() {
    use tokenmeter::bench::traffic::dataset::{Dataset, DatasetFormat, DatasetRow};
    use tokenmeter::bench::{self, run::driver};
    use tokenmeter::engine::SamplingParams;
    use tokenmeter::web::protocol::ChartData;
    use tokenmeter::web::protocol::DatasetChoice;
    use tokenmeter::web::protocol::{decode, encode, FromEngine, RunUpdate, ToEngine};
    use tokenmeter::web::protocol::{Command, Context, Destination};

    let gpu = Rc::new(Gpu::new().await.expect("WebGPU adapter"));
    let (store, _) = fixture!("tiny-gqa-tied", ["config.json", "model.safetensors"]);
    let checkpoint = Checkpoint::open(&store).await.unwrap();
    let options = EngineOptions { max_seqs: 4, ..EngineOptions::default() };
    let mut engine = Engine::new(ForwardPass::load(gpu, &checkpoint, &options, &mut |_, _| {}).await.unwrap());
    let spec = tokenmeter::bench::WorkloadSpec {
        num_requests: 6,
        input_len: "8:24".parse().unwrap(),
        output_len: "3:9".parse().unwrap(),
        ..remote_spec("poisson", 40.0, 1)
    };
    let plan = bench::plan(&spec).unwrap();
    let prompt = |p: &bench::PlannedRequest| Ok(bench::random_prompt(spec.seed, p.id, p.prompt_len, 256));
    let driver_options = driver::DriverOptions {
        decide: None,
        spec: &spec,
        sampling: SamplingParams::default(),
        ignore_eos: true,
        prompt: &prompt,
        think: None,
    };
    let (records, steps) = driver::run(&mut engine, &plan, &driver_options, &mut |_| {}, &|| false).await.unwrap();
    assert!(!records.is_empty() && !steps.is_empty());

    let charts = ChartData::live(&records, &steps);
    let sent = FromEngine::Run(RunUpdate::Progress { finished: 6, total: 6, charts: Some(Box::new(charts.clone())) });
    match decode::<FromEngine>(&encode(&sent)).unwrap() {
        FromEngine::Run(RunUpdate::Progress { finished: 6, total: 6, charts: Some(back) }) => assert_eq!(*back, charts),
        other => panic!("came back as {other:?}"),
    }
    let result = bench::BenchResult {
        decided: None,
        config: Default::default(),
        metrics: bench::summarize(&records, &steps, None, 0.25),
        diagnosis: None,
        baseline: None,
        requests: records,
        steps,
        saturation: None,
        server_metrics: None,
        gpu_metrics: None,
        validity: None,
    };
    let sent = FromEngine::Run(RunUpdate::RateDone { rate: f64::INFINITY, result: Box::new(result.clone()) });
    let json = encode(&sent);
    let back = decode::<FromEngine>(&json).unwrap();
    assert_eq!(encode(&back), json, "a result changed on the way");
    let FromEngine::Run(RunUpdate::RateDone { rate, .. }) = back else { panic!("not a rate's end") };
    assert_eq!(rate, f64::INFINITY);
    let ended = tokenmeter::web::protocol::Ended::Run {
        results: vec![(1.5, result.clone()), (f64::INFINITY, result)],
        spec: spec.clone(),
        label: "embedded".into(),
        batch: Some(4),
        cancelled: true,
        error: Some("stopped".into()),
        // A search whose runs all met the target: no rate missed (NaN, null in JSON).
        search: Some(tokenmeter::bench::run::max_rate::MaxRate {
            rate: Some(1.5),
            lo: 1.5,
            hi: f64::NAN,
            attainment: 0.99,
            tolerance: 0.1,
            slo: "ttft_ms=500".into(),
            converged: false,
            whole_workload_at_once: true,
            first_guess: "1.500 req/s".into(),
            limiting: None,
            trials: Vec::new(),
            max_runs: 12,
            unreachable: None,
            spent_requests: 0,
            spent_s: 0.0,
        }),
    };
    let json = encode(&FromEngine::Run(RunUpdate::Ended(Box::new(ended))));
    let FromEngine::Run(RunUpdate::Ended(back)) = decode::<FromEngine>(&json).unwrap() else { panic!("not an end") };
    let tokenmeter::web::protocol::Ended::Run { results, spec: back_spec, batch, cancelled, error, search, .. } = *back
    else {
        panic!("not a run's end")
    };
    let search = search.expect("the search crossed");
    assert!(search.hi.is_nan() && search.rate == Some(1.5), "{search:?}");
    assert_eq!(results.iter().map(|(r, _)| *r).collect::<Vec<_>>(), [1.5, f64::INFINITY]);
    assert_eq!((back_spec, batch, cancelled, error.as_deref()), (spec, Some(4), true, Some("stopped")));

    // A server's run: the key crosses (the worker sends the requests), with the dataset's rows.
    let mut endpoint = tokenmeter::remote::Endpoint {
        base_url: tokenmeter::remote::BaseUrl::parse("http://127.0.0.1:9/v1").unwrap(),
        model: "m".into(),
        api: tokenmeter::remote::Api::Chat,
        api_key: tokenmeter::remote::ApiKey::new(SECRET.into()),
        thinking: Some(false),
    };
    let t = i18n::text(Lang::En);
    // A sweep ending at "everything at once": an infinite rate, which JSON has no number for.
    let mut form = settings::validate(&|f| Some(f.default_value().to_string()), None, t).unwrap();
    form.rates = vec![2.0, f64::INFINITY];
    let row = DatasetRow {
        at: 1,
        prompt: Some("hello".into()),
        completion: Some("there".into()),
        input_len: None,
        output_len: None,
        timestamp_ms: None,
        hash_ids: None,
        later: vec![("and".into(), "then".into())],
    };
    let data = Dataset {
        file: "d.json".into(),
        format: DatasetFormat::ShareGpt,
        rows: vec![row],
        dropped_short_conversations: 2,
    };
    let choice = DatasetChoice { data: std::sync::Arc::new(data), speedup: 2.0, block_tokens: 512 };
    let cx = || Context {
        lang: Lang::Zh,
        model_key: "embedded".into(),
        loaded: None,
        dataset: Some(choice.clone()),
        page: Default::default(),
    };
    for thinking in [Some(false), None] {
        endpoint.thinking = thinking;
        let destination = Destination::Server(endpoint.clone(), Some("http://127.0.0.1:9/metrics".into()));
        let sent = ToEngine::Command {
            cx: Box::new(cx()),
            command: Command::Run { form: Box::new(form.clone()), destination },
        };
        let json = encode(&sent);
        let ToEngine::Command { cx: back, command: Command::Run { form: back_form, destination } } =
            decode(&json).unwrap()
        else {
            panic!("not a run: {json}")
        };
        let Destination::Server(back_endpoint, metrics) = destination else { panic!("not a server") };
        assert_eq!(back_endpoint.api_key.as_ref().map(|k| k.expose()), Some(SECRET), "the key was lost");
        assert_eq!(
            (back_endpoint.base_url.as_str(), back_endpoint.model.as_str(), back_endpoint.api, back_endpoint.thinking),
            (endpoint.base_url.as_str(), "m", endpoint.api, thinking)
        );
        assert_eq!(metrics.as_deref(), Some("http://127.0.0.1:9/metrics"));
        // The workload crosses as the results JSON records it: a field its arrival process does not
        // use (a Poisson run's concurrency) comes back neutral.
        let recorded = serde_json::from_str(&serde_json::to_string(&form.spec).unwrap()).unwrap();
        assert_eq!(*back_form, settings::RunRequest { spec: recorded, ..form.clone() });
        let data = &back.dataset.as_ref().unwrap().data;
        assert_eq!((data.rows.as_slice(), data.dropped_short_conversations), (choice.data.rows.as_slice(), 2));
        assert_eq!(back.dataset.as_ref().unwrap().speedup, 2.0);
        assert_eq!(back.lang, Lang::Zh);
    }
}

/// The page's trace block size reaches the worker's attach: a shared-block trace whose rows carry
/// one id per 32 tokens is taken at 32 and refused at the default 512, naming the line.
#[wasm_bindgen_test]
fn the_pages_trace_block_size_sizes_the_hash_ids() {
    use tokenmeter::bench::traffic::dataset::{self, DatasetFormat};
    use tokenmeter::web::protocol::DatasetChoice;
    let text = "{\"timestamp\": 0, \"input_length\": 64, \"output_length\": 4, \"hash_ids\": [1, 2]}\n\
                {\"timestamp\": 100, \"input_length\": 70, \"output_length\": 4, \"hash_ids\": [1, 2, 3]}\n";
    let data = dataset::parse("t.jsonl", text.as_bytes(), Some(DatasetFormat::Trace)).unwrap();
    let t = i18n::text(Lang::En);
    let form = settings::validate(&|f| Some(f.default_value().to_string()), None, t).unwrap();
    let attach = |block_tokens: usize| {
        let choice = DatasetChoice { data: std::sync::Arc::new(data.clone()), speedup: 1.0, block_tokens };
        let mut request = form.clone();
        tokenmeter::web::worker::dataset::attach(&choice, &mut request, None, Some(4096)).map(|()| request)
    };
    let request = attach(32).expect("32-token blocks fit the ids");
    assert_eq!(request.spec.num_requests, 2);
    let refused = attach(512).expect_err("at 512 tokens a block the first row has too many ids").to_string();
    assert!(refused.contains("line 1") && refused.contains("Trace block size"), "{refused}");
}
