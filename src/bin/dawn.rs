//! `tokenmeter-dawn`: the page's engine and benchmark code without a page, in Node on Dawn (Chrome's
//! WebGPU: the `webgpu` npm package's dawn.node), run by `scripts/dawn-run SUBCOMMAND ARGS`. It
//! takes the CLI's arguments for `adapter`, `roofline`, `speed`, `bench` (a synthetic shape; the
//! kernel switches; `bench`'s run request, read by the same `RunRequest::parse` and run by the same
//! launcher as the CLI's and the page's) and `generate` (token-id prompts on a `--model` folder,
//! whose files the Node side reads), and prints the JSON `tokenmeter` prints, so the two
//! compare row for row on the same GPU (`scripts/device-check`), and `tokenmeter compare` reads a
//! bench's results. Natively there is nothing to run.

// A function a reader can hold: at most 150 lines (clippy.toml), held by CI's `-D warnings`.
#![warn(clippy::too_many_lines)]

#[cfg(target_arch = "wasm32")]
mod dawn {
    use std::cell::{Cell, RefCell};
    use std::collections::BTreeMap;
    use std::rc::Rc;
    use tokenmeter::bench;
    use tokenmeter::bench::base::field::Field;
    use tokenmeter::bench::base::rules::problems_error;
    use tokenmeter::bench::record::run_config::{RunConfig, SavedRequest};
    use tokenmeter::bench::request::RunRequest;
    use tokenmeter::bench::run::launch::{self, OnEngine};
    use tokenmeter::bench::run::session::SessionSpec;
    use tokenmeter::bench::run::speed::{self, SpeedPlan};
    use tokenmeter::bench::run::target::Listener;
    use tokenmeter::engine::generate::check_prompt_fits;
    use tokenmeter::engine::trial::{self, TrialPlan};
    use tokenmeter::engine::{Engine, EngineOptions, ForwardPass, Request, SamplingParams};
    use tokenmeter::gpu::kernels::{KernelSwitches, TrialUse};
    use tokenmeter::gpu::{Gpu, SharedGpu};
    use tokenmeter::limits::{self, parse_count};
    use tokenmeter::model::checkpoint::Checkpoint;
    use tokenmeter::model::synthetic::SyntheticModel;
    use tokenmeter::model::Qwen3Config;
    use tokenmeter::model::{MemStore, ModelStore, Tokenizer};
    use wasm_bindgen::prelude::*;

    /// The flags each subcommand takes (each `--name VALUE`); the kernel switches are the page's
    /// link keys, which are the CLI's flag names.
    const SPEED_FLAGS: [&str; 10] = [
        "synthetic",
        "planted-dispatches",
        "batches",
        "prefill",
        "prefill-repeats",
        "steps",
        "context",
        "max-batched-tokens",
        "kv-blocks",
        "weights",
    ];

    /// The kernel switches (`KernelSwitches::from_query`), which `speed` and `bench` take.
    const KERNEL_FLAGS: [&str; 8] = [
        "kernels",
        "weight-storage",
        "subgroups",
        "matmul-tile",
        "fused",
        "prefill-tiles",
        "gemv-max-m",
        "kernel-trial",
    ];

    /// `--name VALUE` pairs, every name one of `allowed`, none twice.
    fn flags(args: &[String], allowed: &[&str]) -> Result<BTreeMap<String, String>, String> {
        let mut out = BTreeMap::new();
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let name = arg.strip_prefix("--").filter(|n| allowed.contains(n)).ok_or_else(|| {
                format!("unexpected argument {:?} (takes --{})", limits::printable(arg), allowed.join(", --"))
            })?;
            let value = it.next().ok_or_else(|| format!("--{name} needs a value"))?;
            if out.insert(name.to_string(), value.clone()).is_some() {
                return Err(format!("--{name} given twice"));
            }
        }
        Ok(out)
    }

    fn counts(value: &str, max: usize) -> Result<Vec<usize>, String> {
        value.split(',').map(|v| parse_count(v, 1, max)).collect()
    }

    fn json(value: &impl serde::Serialize) -> String {
        serde_json::to_string_pretty(value).expect("serialisable")
    }

    /// Runs one subcommand; its JSON is the result, its progress lines go to `console.error`.
    #[wasm_bindgen]
    pub async fn run(args: Vec<String>) -> Result<String, String> {
        let (command, rest) = args.split_first().ok_or("usage: dawn-run adapter|roofline|speed|bench|generate ARGS")?;
        match command.as_str() {
            "adapter" => {
                flags(rest, &[])?;
                let gpu = Gpu::new().await.map_err(|e| e.to_string())?;
                Ok(json(&gpu.adapter))
            }
            "roofline" => {
                flags(rest, &[])?;
                let gpu = Gpu::new().await.map_err(|e| e.to_string())?;
                let roof = tokenmeter::gpu::roofline::measure(&gpu, 8).await.map_err(|e| e.to_string())?;
                Ok(json(&serde_json::json!({ "adapter": gpu.adapter.name, "roofline": roof, "host_copy_gb_s": null })))
            }
            "speed" => speed(flags(rest, &[&SPEED_FLAGS[..], &KERNEL_FLAGS[..]].concat())?).await,
            "bench" => bench(rest).await,
            "generate" => generate(rest).await,
            other => Err(format!(
                "unknown subcommand {:?} (adapter, roofline, speed, bench, generate)",
                limits::printable(other)
            )),
        }
    }

    thread_local! {
        /// The files of `--model DIR`, given by the Node side (`add_file`) before `run`.
        static FILES: RefCell<MemStore> = RefCell::new(MemStore::new("--model"));
    }

    /// One file of the `--model` folder (Node reads the folder; the wasm build cannot).
    #[wasm_bindgen]
    pub fn add_file(name: String, bytes: Vec<u8>) {
        FILES.with(|files| files.borrow_mut().files.insert(name, std::sync::Arc::new(bytes)));
    }

    /// `generate` with the CLI's arguments for token-id prompts: `--model DIR` (its files, read by
    /// the Node side) or `--synthetic NAME`, `--prompt-ids 1,2,3` (repeatable), `--max-new-tokens`,
    /// `--ignore-eos`, `--weights` and the kernel switches; greedy. Prints what `tokenmeter generate
    /// --json` prints: a JSON line per prompt.
    async fn generate(args: &[String]) -> Result<String, String> {
        let (mut prompts, mut named, mut ignore_eos) = (Vec::new(), BTreeMap::new(), false);
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let shown = limits::printable(arg);
            match arg.strip_prefix("--") {
                Some("ignore-eos") => ignore_eos = true,
                Some("json") => {} // always JSON
                Some(name)
                    if name == "prompt-ids" || GENERATE_FLAGS.contains(&name) || KERNEL_FLAGS.contains(&name) =>
                {
                    let value = it.next().ok_or_else(|| format!("{shown} needs a value"))?;
                    if name == "prompt-ids" {
                        prompts.push(prompt_ids(value)?);
                    } else if named.insert(name.to_string(), value.clone()).is_some() {
                        return Err(format!("{shown} given twice"));
                    }
                }
                _ => return Err(format!("unexpected argument {shown} (generate takes --model DIR --prompt-ids …)")),
            }
        }
        if prompts.is_empty() {
            return Err("pass --prompt-ids 1,2,3 (text prompts are the CLI's)".into());
        }
        let get = |k: &str| named.get(k).cloned();
        let max_new_tokens = get("max-new-tokens")
            .map_or(Ok(32), |v| parse_count(&v, 1, limits::MAX_TOKENS))
            .map_err(|e| e.to_string())?;
        let options = EngineOptions {
            weights: get("weights").map_or(Ok(EngineOptions::default().weights), |v| v.parse())?,
            kernels: KernelSwitches::from_query(get)?,
            ..EngineOptions::default()
        };
        let gpu = SharedGpu::new(Gpu::new().await.map_err(|e| e.to_string())?);
        let fail = |e: tokenmeter::Error| e.to_string();
        let (model, tokenizer) = match (get("model"), get("synthetic")) {
            (Some(_), Some(_)) => return Err("--model or --synthetic, not both".into()),
            (Some(_), None) => {
                let store = FILES.with(|files| std::mem::replace(&mut *files.borrow_mut(), MemStore::new("--model")));
                let checkpoint = Checkpoint::open(&store).await.map_err(fail)?;
                let tokenizer = match store.read_all("tokenizer.json", limits::TOKENIZER_JSON_MAX_BYTES).await {
                    Ok(Some(bytes)) => Some(Tokenizer::from_bytes(&bytes).map_err(fail)?),
                    Ok(None) => None,
                    Err(e) => return Err(e.to_string()),
                };
                for prompt in &prompts {
                    check_prompt_fits(&checkpoint.config, prompt, max_new_tokens).map_err(fail)?;
                }
                (ForwardPass::load(gpu, &checkpoint, &options, &mut |_, _| {}).await.map_err(fail)?, tokenizer)
            }
            (None, None) => return Err("generate needs --model DIR or --synthetic NAME".into()),
            (None, name) => {
                let (_, cfg) = synthetic("generate", name)?;
                for prompt in &prompts {
                    check_prompt_fits(&cfg, prompt, max_new_tokens).map_err(fail)?;
                }
                let source = SyntheticModel::new(cfg, 0);
                (ForwardPass::load(gpu, &source, &options, &mut |_, _| {}).await.map_err(fail)?, None)
            }
        };
        let requests: Vec<Request> = prompts
            .into_iter()
            .map(|prompt| Request {
                prompt,
                max_new_tokens,
                sampling: SamplingParams::default(),
                stop_ids: model.cfg.eos_token_ids.clone(),
                ignore_eos,
            })
            .collect();
        let mut engine = Engine::new(model);
        let done = tokenmeter::engine::generate(&mut engine, requests, &mut |_| {}).await.map_err(fail)?;
        let mut lines = Vec::new();
        for c in done {
            let text = tokenizer.as_ref().map(|t| t.decode(&c.tokens)).transpose().map_err(fail)?;
            lines.push(c.json_line(text).to_string());
        }
        Ok(lines.join("\n"))
    }

    /// The flags `generate` takes with a value, beside `--prompt-ids` and the kernel switches.
    const GENERATE_FLAGS: [&str; 4] = ["model", "synthetic", "max-new-tokens", "weights"];

    /// `--prompt-ids`' list: comma-separated token ids.
    fn prompt_ids(text: &str) -> Result<Vec<u32>, String> {
        let ids = text
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<u32>().map_err(|_| format!("--prompt-ids: {:?} is not a token id", limits::printable(s)))
            })
            .collect::<Result<Vec<u32>, String>>()?;
        if ids.is_empty() {
            return Err("--prompt-ids is empty".into());
        }
        Ok(ids)
    }

    /// The engine's flags `bench` takes beside the run request's and the kernel switches.
    const BENCH_ENGINE_FLAGS: [&str; 2] = ["synthetic", "kv-blocks"];

    /// `bench` with the CLI's arguments: the run request's flags (`Field::from_flag`), the
    /// engine's, `--no-baseline` and `--respect-eos`; the results JSON as `tokenmeter bench --json`
    /// writes it (one result, or a list for a sweep), with the request recorded.
    async fn bench(args: &[String]) -> Result<String, String> {
        let (mut form, mut engine_flags) = (BTreeMap::new(), BTreeMap::new());
        let (mut baseline, mut ignore_eos) = (true, true);
        let mut it = args.iter().peekable();
        while let Some(arg) = it.next() {
            let shown = limits::printable(arg);
            match arg.as_str() {
                "--no-baseline" => baseline = false,
                "--respect-eos" => ignore_eos = false,
                _ if Field::from_flag(arg, None).is_some() => {
                    let (field, text) = Field::from_flag(arg, None).expect("a switch");
                    form.insert(field, text);
                }
                _ => {
                    let value = it.next().ok_or_else(|| format!("{shown} needs a value"))?;
                    match (Field::from_flag(arg, Some(value)), arg.strip_prefix("--")) {
                        (Some((field, text)), _) => {
                            form.insert(field, text);
                        }
                        (None, Some(name)) if BENCH_ENGINE_FLAGS.contains(&name) || KERNEL_FLAGS.contains(&name) => {
                            engine_flags.insert(name.to_string(), value.clone());
                        }
                        _ => return Err(format!("unexpected argument {shown} (bench takes the CLI's run flags)")),
                    }
                }
            }
        }
        let request = RunRequest::parse(&|f| form.get(&f).cloned(), None)
            .map_err(|problems| problems_error(&problems).to_string())?;
        if form.contains_key(&Field::Dataset) {
            return Err("--dataset: files are not read here (a synthetic workload only)".into());
        }
        if request.search.is_some() {
            return Err("--rate max: the search runs in the native CLI (tokenmeter bench --rate max)".into());
        }
        let get = |k: &str| engine_flags.get(k).cloned();
        let (name, cfg) = synthetic("bench", get("synthetic"))?;
        request.check_loaded(cfg.max_position_embeddings).map_err(|problems| problems_error(&problems).to_string())?;
        let options = EngineOptions {
            max_batched_tokens: request.max_batched_tokens,
            max_seqs: request.max_batch,
            kv_blocks: get("kv-blocks").map(|v| parse_count(&v, 1, limits::MAX_KV_BLOCKS)).transpose()?,
            weights: request.load.weights,
            speculation: request.load.speculation.clone(),
            prefix_cache: request.load.prefix_cache,
            kernels: KernelSwitches::from_query(get)?,
            ..EngineOptions::default()
        };
        let gpu = SharedGpu::new(Gpu::new().await.map_err(|e| e.to_string())?);
        let source = SyntheticModel::new(cfg, 0);
        let model = ForwardPass::load(gpu, &source, &options, &mut |_, _| {}).await.map_err(|e| e.to_string())?;
        let mut engine = Engine::new(model);
        engine.set_policy(request.policy).map_err(|e| e.to_string())?;
        let session = SessionSpec { baseline, ignore_eos, ..request.session(bench::Lang::En) };
        let describe = RunConfig { target: "dawn".into(), model: Some(name), ..RunConfig::default() };
        let quiet: Listener = Rc::new(|_| {});
        let mut results = Vec::new();
        let cancel = Rc::new(Cell::new(false));
        let on = OnEngine::new(&mut engine, None, true, describe);
        let outcome = launch::run(on, &session, None, &quiet, &cancel, &mut results).await;
        let saved = SavedRequest { command: "bench".into(), args: args.to_vec(), dataset_sha256: None };
        for r in &mut results {
            r.config.request = Some(saved.clone());
        }
        outcome.map_err(|e| e.to_string())?;
        Ok(if results.len() == 1 { json(&results[0]) } else { json(&results) })
    }

    /// The synthetic shape `--synthetic` names (model files are not read here).
    fn synthetic(command: &str, name: Option<String>) -> Result<(String, Qwen3Config), String> {
        let name = name.ok_or_else(|| format!("{command} needs --synthetic NAME (model files are not read here)"))?;
        let cfg = Qwen3Config::preset(&name).ok_or_else(|| {
            format!(
                "unknown synthetic model {:?} (one of {})",
                limits::printable(&name),
                Qwen3Config::PRESETS.join(", ")
            )
        })?;
        Ok((name, cfg))
    }

    async fn speed(flags: BTreeMap<String, String>) -> Result<String, String> {
        let get = |k: &str| flags.get(k).cloned();
        let (name, cfg) = synthetic("speed", get("synthetic"))?;
        let plan = SpeedPlan {
            batches: counts(&get("batches").unwrap_or(speed::DEFAULT_BATCHES.into()), limits::MAX_SEQS)?,
            prefill: counts(&get("prefill").unwrap_or(speed::DEFAULT_PREFILL.into()), limits::MAX_BATCHED_TOKENS)?,
            steps: get("steps").map_or(Ok(speed::DEFAULT_STEPS), |v| parse_count(&v, 1, limits::MAX_SPEED_STEPS))?,
            prefill_repeats: get("prefill-repeats")
                .map_or(Ok(speed::DEFAULT_PREFILL_REPEATS), |v| parse_count(&v, 1, limits::MAX_SPEED_STEPS))?,
            context: get("context").map_or(Ok(speed::DEFAULT_CONTEXT), |v| parse_count(&v, 1, limits::MAX_TOKENS))?,
            profile: false,
            planted_dispatches: get("planted-dispatches").map_or(Ok(0), |v| parse_count(&v, 0, 100_000))?,
        };
        let defaults = EngineOptions::default();
        let max_batched = get("max-batched-tokens")
            .map_or(Ok(defaults.max_batched_tokens), |v| parse_count(&v, 1, limits::MAX_BATCHED_TOKENS))?;
        let options = EngineOptions {
            // As the CLI's speed: the longest prefill in one step, the largest batch in one step.
            max_batched_tokens: max_batched.max(plan.prefill.iter().copied().max().unwrap_or(0)),
            max_seqs: plan.batches.iter().copied().max().unwrap_or(1),
            kv_blocks: get("kv-blocks").map(|v| parse_count(&v, 1, limits::MAX_KV_BLOCKS)).transpose()?,
            weights: get("weights").map_or(Ok(defaults.weights), |v| v.parse())?,
            kernels: KernelSwitches::from_query(get)?,
            ..defaults
        };
        let gpu = SharedGpu::new(Gpu::new().await.map_err(|e| e.to_string())?);
        let source = SyntheticModel::new(cfg, 0);
        let mut model = ForwardPass::load(gpu, &source, &options, &mut |_, _| {}).await.map_err(|e| e.to_string())?;
        let log = |line: String| web_sys::console::error_1(&line.into());
        // As natively, the kernels the switches leave open are timed (Node keeps no trial).
        if options.kernels.trial != Some(TrialUse::Off) {
            let trial_plan = TrialPlan::new(&plan.prefill, options.max_seqs);
            let t = trial::run(&mut model, &trial_plan, &options.kernels, None).await.map_err(|e| e.to_string())?;
            log(t.line());
        }
        let roof = tokenmeter::gpu::roofline::measure(&model.gpu, 8).await.map_err(|e| e.to_string())?;
        log(speed::roofline_line(&roof, None));
        let mut engine = Engine::new(model);
        let out = speed::table(&mut engine, &roof, &plan, None, Some(name), &mut |line| log(line))
            .await
            .map_err(|e| e.to_string())?;
        Ok(json(&out))
    }
}

fn main() {
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("tokenmeter-dawn is a wasm build run in Node on Dawn: scripts/dawn-run SUBCOMMAND ARGS");
}
