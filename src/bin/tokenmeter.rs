//! The `tokenmeter` command line: the engine and the benchmark, headless, on the first
//! GPU adapter (lavapipe on machines without a GPU).

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    std::process::exit(cli::main());
}

#[cfg(not(target_arch = "wasm32"))]
mod cli {
    mod compare;
    mod policy;
    mod remote;
    mod serving;
    mod soak;
    mod spec;
    mod switches;

    use clap::{Args, Parser, Subcommand};
    use std::cell::Cell;
    use std::rc::Rc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use tokenmeter::bench::session::{Listener, SessionEvent};
    use tokenmeter::engine::{
        generate as run_requests, EngineOptions, EventKind, ForwardPass, Request, SamplingParams,
    };
    use tokenmeter::gpu::Gpu;
    use tokenmeter::limits::{self, parse_count, parse_number};
    use tokenmeter::model::checkpoint::Checkpoint;
    use tokenmeter::model::source::DirStore;
    use tokenmeter::model::synthetic::SyntheticModel;
    use tokenmeter::model::{ModelStore, Qwen3Config, TensorProvider, Tokenizer};
    use tokenmeter::{Error, Result};

    #[derive(Parser)]
    #[command(name = "tokenmeter", version, about = "Qwen3 on WebGPU/Vulkan: generation and serving benchmarks")]
    struct Cli {
        #[command(subcommand)]
        command: Command,
    }

    #[derive(Subcommand)]
    enum Command {
        /// Greedy generation for one or more prompts.
        Generate(GenerateArgs),
        /// Serve a simulated workload (Poisson or other arrivals) and report TTFT, TPOT, ITL, throughput.
        Bench(Box<BenchArgs>),
        /// Show the GPU adapter and its limits.
        Adapter,
        /// Measure the adapter's copy bandwidth and FMA rate (and, natively, host memory copy bandwidth).
        Roofline,
        /// Engine speed vs the roofline: decode at several batch sizes, prefill at several lengths.
        Speed(SpeedArgs),
        /// Thousands of requests under KV pressure, every event and KV block checked, memory watched.
        Soak(soak::SoakArgs),
        /// The same workload under two settings, alternately and repeatedly: B − A per metric with a
        /// confidence interval and a verdict (better, worse, no detectable difference).
        Compare(compare::CompareArgs),
    }

    #[derive(Args)]
    struct SpeedArgs {
        #[command(flatten)]
        model: ModelArgs,
        /// Decode batch sizes.
        #[arg(long, value_delimiter = ',', default_value = "1,4,16,64", allow_negative_numbers = true,
              value_parser = |s: &str| parse_count(s, 1, limits::MAX_SEQS))]
        batches: Vec<usize>,
        /// Prefill lengths.
        #[arg(long, value_delimiter = ',', default_value = "128,512,2048", allow_negative_numbers = true,
              value_parser = |s: &str| parse_count(s, 1, limits::MAX_BATCHED_TOKENS))]
        prefill: Vec<usize>,
        /// Decode steps per batch size.
        #[arg(long, default_value_t = 8, allow_negative_numbers = true,
              value_parser = |s: &str| parse_count(s, 1, limits::MAX_SPEED_STEPS))]
        steps: usize,
        /// Prompt tokens per decoding sequence (decode speed at a longer context: try 2048).
        #[arg(long, default_value_t = 16, allow_negative_numbers = true,
              value_parser = |s: &str| parse_count(s, 1, limits::MAX_TOKENS))]
        context: usize,
        /// Also time one decode step per batch size kernel by kernel and print where it goes.
        #[arg(long)]
        profile: bool,
    }

    #[derive(Args)]
    struct BenchArgs {
        #[command(flatten)]
        model: ModelArgs,
        #[command(flatten)]
        policy: policy::PolicyArgs,
        #[command(flatten)]
        remote: Box<remote::RemoteArgs>, // boxed: keeps `Command` small
        #[command(flatten)]
        serving: Box<serving::ServingArgs>,
        /// poisson, gamma, constant, sequential (next request when the previous finishes), concurrency.
        #[arg(long, default_value = "poisson")]
        arrival: String,
        /// Requests per second ("inf": all at once). Several (1,2,4,inf) run a sweep.
        #[arg(long, default_value = "4", allow_hyphen_values = true)]
        rate: String,
        /// Open loops: "drawn" (request 0 at once, the last around (N-1)/rate by chance) or
        /// "exact" (a gap before each request, rescaled so the last arrives at exactly N/rate).
        #[arg(long, default_value = "drawn")]
        arrival_span: String,
        /// Gamma shape (1 = Poisson; larger = more regular).
        #[arg(long, default_value_t = 1.0, allow_negative_numbers = true,
              value_parser = |s: &str| parse_number(s, limits::MIN_BURSTINESS, limits::MAX_BURSTINESS))]
        burstiness: f64,
        /// Closed-loop users for --arrival concurrency.
        #[arg(long, default_value_t = 4, allow_negative_numbers = true,
              value_parser = |s: &str| parse_count(s, 1, limits::MAX_CONCURRENCY))]
        concurrency: usize,
        /// Requests per rate (default 32; with --dataset, every usable row).
        #[arg(long, allow_negative_numbers = true, value_parser = |s: &str| parse_count(s, 1, limits::MAX_REQUESTS))]
        num_requests: Option<usize>,
        /// Prompt tokens: N or MIN:MAX.
        #[arg(long, default_value = "128", allow_hyphen_values = true)]
        input_len: String,
        /// Output tokens: N or MIN:MAX.
        #[arg(long, default_value = "64", allow_hyphen_values = true)]
        output_len: String,
        /// Every prompt starts with the same N tokens (a shared "system prompt"), counted in
        /// --input-len; 0 (default): no shared prefix.
        #[arg(long, default_value_t = 0, allow_negative_numbers = true,
              value_parser = |s: &str| parse_count(s, 0, limits::MAX_TOKENS))]
        shared_prefix_len: usize,
        /// With --shared-prefix-len: G different prefixes, request i taking prefix i mod G.
        #[arg(long, default_value_t = 1, allow_negative_numbers = true,
              value_parser = |s: &str| parse_count(s, 1, limits::MAX_PREFIX_GROUPS))]
        prefix_groups: usize,
        #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
        seed: u64,
        /// Service-level objectives for goodput, e.g. ttft_ms=200,tpot_ms=50.
        #[arg(long)]
        slo: Option<String>,
        /// Report language: en or zh.
        #[arg(long, default_value = "en")]
        lang: String,
        /// Stop at EOS instead of generating exactly --output-len tokens.
        #[arg(long)]
        respect_eos: bool,
        /// Random token ids even when the model has a tokenizer (default: built-in text prompts).
        #[arg(long)]
        random_prompts: bool,
        /// Skip the single-request baseline (and the diagnosis that needs it).
        #[arg(long)]
        no_baseline: bool,
        /// Write the results JSON (config, summary, diagnosis, every request and step) here
        /// (a sweep writes a list, one result per rate).
        #[arg(long, alias = "out")]
        json: Option<std::path::PathBuf>,
        /// Write one CSV row per request here.
        #[arg(long)]
        csv: Option<std::path::PathBuf>,
        /// Write a self-contained HTML report here (SVG charts, the request timeline, the text
        /// report and the run record; one section per rate), e.g. to attach to a pull request.
        #[arg(long)]
        html: Option<std::path::PathBuf>,
    }

    #[derive(Args)]
    struct ModelArgs {
        /// A Hugging Face model folder: config.json, *.safetensors (or sharded with an index), tokenizer.json.
        #[arg(long, conflicts_with = "synthetic")]
        model: Option<std::path::PathBuf>,
        /// Random weights with a published shape: qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b.
        #[arg(long)]
        synthetic: Option<String>,
        /// Tokens per engine step (prefill chunks + decodes).
        #[arg(long, default_value_t = 512, allow_negative_numbers = true,
              value_parser = |s: &str| parse_count(s, 1, limits::MAX_BATCHED_TOKENS))]
        max_batched_tokens: usize,
        /// Sequences per engine step.
        #[arg(long, default_value_t = 16, allow_negative_numbers = true,
              value_parser = |s: &str| parse_count(s, 1, limits::MAX_SEQS))]
        max_batch: usize,
        /// KV cache blocks (default: as many as 512 MiB and the adapter allow).
        #[arg(long, allow_negative_numbers = true, value_parser = |s: &str| parse_count(s, 1, limits::MAX_KV_BLOCKS))]
        kv_blocks: Option<usize>,
        /// Tokens per KV block.
        #[arg(long, default_value_t = 16, allow_negative_numbers = true,
              value_parser = |s: &str| parse_count(s, 1, limits::MAX_BLOCK_SIZE))]
        block_size: usize,
        #[command(flatten)]
        spec: spec::SpecArgs,
        #[command(flatten)]
        switches: switches::SwitchArgs,
        /// How the matrices are stored on the GPU: bf16 (as the checkpoint), int8 (per-row scales) or
        /// int4 (a scale per 32 weights), quantised at load; norms stay f32.
        #[arg(long, default_value = "bf16")]
        weights: tokenmeter::gpu::WeightFormat,
    }

    #[derive(Args)]
    struct GenerateArgs {
        #[command(flatten)]
        model: ModelArgs,
        #[command(flatten)]
        policy: policy::PolicyArgs,
        /// A user message; the Qwen3 chat template is applied. Repeatable.
        #[arg(long)]
        prompt: Vec<String>,
        /// Raw prompt token ids, comma separated. Repeatable.
        #[arg(long)]
        prompt_ids: Vec<String>,
        #[arg(long, default_value_t = 32, allow_negative_numbers = true,
              value_parser = |s: &str| parse_count(s, 1, limits::MAX_TOKENS))]
        max_new_tokens: usize,
        /// Keep going past end-of-sequence tokens.
        #[arg(long)]
        ignore_eos: bool,
        /// 0 = greedy.
        #[arg(long, default_value_t = 0.0, allow_negative_numbers = true,
              value_parser = |s: &str| parse_number(s, 0.0, limits::MAX_TEMPERATURE).map(|x| x as f32))]
        temperature: f32,
        /// 0 = off.
        #[arg(long, default_value_t = 0, allow_negative_numbers = true,
              value_parser = |s: &str| parse_count(s, 0, limits::MAX_VOCAB).map(|k| k as u32))]
        top_k: u32,
        /// 1 = off.
        #[arg(long, default_value_t = 1.0, allow_negative_numbers = true,
              value_parser = |s: &str| parse_number(s, 0.0, 1.0).map(|p| p as f32))]
        top_p: f32,
        /// Seed of the first prompt's sampler (prompt i uses seed + i).
        #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
        seed: u64,
        /// With --prompt: add the empty think block (enable_thinking=False).
        #[arg(long)]
        no_think: bool,
        /// One JSON line per prompt.
        #[arg(long)]
        json: bool,
    }

    pub fn main() -> i32 {
        let cli = match Cli::try_parse() {
            Ok(c) => c,
            Err(e)
                if !e.use_stderr() || e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand =>
            {
                let _ = e.print();
                return if e.use_stderr() { 2 } else { 0 };
            }
            Err(e) => {
                // One line, as every other error: clap's first paragraph (its tips and usage dropped).
                let text = e.render().to_string();
                let first: Vec<&str> = text.lines().map(str::trim).take_while(|l| !l.is_empty()).collect();
                eprintln!("{}", first.join(" "));
                return 2;
            }
        };
        let result = match cli.command {
            Command::Generate(args) => pollster::block_on(generate(args)),
            Command::Bench(args) => pollster::block_on(bench(*args)),
            Command::Adapter => pollster::block_on(adapter()),
            Command::Roofline => pollster::block_on(roofline()),
            Command::Speed(args) => pollster::block_on(speed(args)),
            Command::Soak(args) => return soak::main(args),
            Command::Compare(args) => pollster::block_on(compare::main(args)),
        };
        match result {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("error: {e}");
                match e {
                    Error::Invalid(_) | Error::Prompt(_) => 2,
                    Error::Cancelled => 130, // Ctrl-C, as a shell reports it
                    _ => 1,
                }
            }
        }
    }

    /// Host memory copy of 256 MiB (read + written bytes), median of 8: the machine's own bandwidth,
    /// measured outside the GPU stack.
    fn host_copy_gb_s() -> f64 {
        let n = 256 << 20;
        let src = vec![1u8; n];
        let mut dst = vec![0u8; n];
        let mut times: Vec<f64> = (0..8)
            .map(|_| {
                let t = std::time::Instant::now();
                dst.copy_from_slice(std::hint::black_box(&src));
                std::hint::black_box(&dst);
                t.elapsed().as_secs_f64()
            })
            .collect();
        times.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
        2.0 * n as f64 / times[4] / 1e9
    }

    async fn roofline() -> Result<()> {
        let gpu = Gpu::new().await?;
        let r = tokenmeter::gpu::roofline::measure(&gpu, 8).await?;
        let host = host_copy_gb_s();
        let out = serde_json::json!({ "adapter": gpu.adapter.name, "roofline": r, "host_copy_gb_s": host });
        println!("{}", serde_json::to_string_pretty(&out).expect("serialisable"));
        Ok(())
    }

    async fn speed(mut args: SpeedArgs) -> Result<()> {
        use tokenmeter::bench::speed;
        let biggest_prefill = args.prefill.iter().copied().max().unwrap_or(0);
        args.model.max_batched_tokens = args.model.max_batched_tokens.max(biggest_prefill);
        let max_batch = args.batches.iter().copied().max().unwrap_or(1);
        let loaded = open(&args.model).await?;
        let (cfg, tokenizer) = match &loaded {
            Opened::Disk(c, t) => (&c.config, t.as_ref().as_ref()),
            Opened::Synthetic(s) => (&s.config, None),
        };
        let draft = args.model.spec.open_draft(cfg, tokenizer).await?;
        let model = match &loaded {
            Opened::Disk(c, _) => load_with(&args.model, c, max_batch).await?,
            Opened::Synthetic(s) => load_with(&args.model, s, max_batch).await?,
        };
        let roof = tokenmeter::gpu::roofline::measure(&model.gpu, 8).await?;
        let host = host_copy_gb_s();
        eprintln!(
            "roofline: copy {:.2} GB/s (blocked {:.2}, strided {:.2}{}), FMA {:.1} GFLOP/s; host memcpy {host:.2} GB/s",
            roof.copy_gb_s,
            roof.copy_blocked_gb_s,
            roof.copy_strided_gb_s,
            roof.copy_texture_gb_s.map(|t| format!(", texture {t:.2}")).unwrap_or_default(),
            roof.fma_gflop_s
        );
        let mut engine = args.model.spec.engine(model, draft, &engine_options(&args.model, max_batch)).await?;
        let mut decode = Vec::new();
        for &b in &args.batches {
            let d = speed::decode(&mut engine, &roof, b, args.context, args.steps, args.profile).await?;
            eprintln!(
                "decode batch {:>3} at context {:>5}: {:>8.2} ms/step {:>8.1} tok/s  {:>6.2} GB/s = {:>5.1}% of adapter copy, {:>5.1}% of host memcpy",
                b, d.context, d.step_ms, d.tokens_per_s, d.gb_s, 100.0 * d.fraction_of_copy, 100.0 * d.gb_s / host
            );
            if d.drafted_per_step > 0.0 {
                eprintln!(
                    "    speculation: {:.2} draft tokens verified per step, {:.2} accepted ({:.1}%): {:.2} tokens per sequence per step",
                    d.drafted_per_step,
                    d.accepted_per_step,
                    100.0 * d.accepted_per_step / d.drafted_per_step,
                    1.0 + d.accepted_per_step / b as f64
                );
            }
            let total: f64 = d.profile.iter().map(|k| k.ms).sum();
            for k in &d.profile {
                eprintln!(
                    "    {:<16} {:>4} dispatches {:>9.2} ms  {:>5.1}%",
                    k.kernel,
                    k.dispatches,
                    k.ms,
                    100.0 * k.ms / total
                );
            }
            decode.push(d);
        }
        let mut prefill = Vec::new();
        for &n in &args.prefill {
            let p = speed::prefill(&mut engine, &roof, n).await?;
            eprintln!(
                "prefill {:>5} tokens: {:>9.1} ms {:>8.1} tok/s  {:>6.1} GFLOP/s = {:>5.1}% of FMA peak",
                n,
                p.ms,
                p.tokens_per_s,
                p.gflop_s,
                100.0 * p.fraction_of_fma
            );
            prefill.push(p);
        }
        let out = serde_json::json!({
            "adapter": engine.model.gpu.adapter.name,
            "kernel_family": engine.model.kernel_options().family,
            "kernels": tokenmeter::bench::session::KernelPath::of(&engine.model.kernel_options()),
            "weight_format": engine.model.kernel_options().format,
            "weight_bytes_per_token": engine.model.weights.bytes_per_token(),
            "model": args.model.model.as_ref().map(|p| p.display().to_string()).or(args.model.synthetic.clone()),
            "roofline": roof,
            "host_copy_gb_s": host,
            "decode": decode,
            "prefill": prefill,
        });
        println!("{}", serde_json::to_string_pretty(&out).expect("serialisable"));
        Ok(())
    }

    async fn adapter() -> Result<()> {
        let gpu = Gpu::new().await?;
        println!("{}", serde_json::to_string_pretty(&gpu.adapter).expect("serialisable"));
        Ok(())
    }

    /// A model opened from its files or a synthetic shape, before its weights go to the GPU.
    enum Opened {
        Disk(Checkpoint<tokenmeter::model::source::DiskFile>, Box<Option<Tokenizer>>),
        Synthetic(SyntheticModel),
    }

    async fn open(args: &ModelArgs) -> Result<Opened> {
        match (&args.model, &args.synthetic) {
            (Some(dir), _) => {
                let store = DirStore::new(dir)?;
                let checkpoint = Checkpoint::open(&store).await?;
                let tokenizer =
                    match store.read_all("tokenizer.json", tokenmeter::limits::TOKENIZER_JSON_MAX_BYTES).await? {
                        Some(bytes) => Some(Tokenizer::from_bytes(&bytes)?),
                        None => None,
                    };
                Ok(Opened::Disk(checkpoint, Box::new(tokenizer)))
            }
            (None, Some(name)) => {
                let cfg = Qwen3Config::preset(name).ok_or_else(|| {
                    Error::Invalid(format!(
                        "unknown synthetic model {name:?} (one of {})",
                        Qwen3Config::PRESETS.join(", ")
                    ))
                })?;
                Ok(Opened::Synthetic(SyntheticModel::new(cfg, 0)))
            }
            (None, None) => Err(Error::Invalid("pass --model DIR or --synthetic NAME".into())),
        }
    }

    async fn load<P: TensorProvider>(args: &ModelArgs, src: &P) -> Result<ForwardPass> {
        load_with(args, src, args.max_batch).await
    }

    /// The engine options `args` ask for, with `max_batch` sequences per step.
    fn engine_options(args: &ModelArgs, max_batch: usize) -> EngineOptions {
        let mut options = EngineOptions {
            max_batched_tokens: args.max_batched_tokens,
            max_seqs: max_batch,
            block_size: args.block_size,
            kv_blocks: args.kv_blocks,
            weights: args.weights,
            overlap: args.switches.overlap(),
            kernels: args.switches.kernels(),
            ..EngineOptions::default()
        };
        args.spec.apply(&mut options);
        options
    }

    async fn load_with<P: TensorProvider>(args: &ModelArgs, src: &P, max_batch: usize) -> Result<ForwardPass> {
        let gpu = Arc::new(Gpu::new().await?);
        let options = engine_options(args, max_batch);
        let start = std::time::Instant::now();
        let mut last_pct = 0;
        let model = ForwardPass::load(gpu, src, &options, &mut |done, total| {
            let pct = done * 100 / total.max(1);
            if pct >= last_pct + 10 {
                last_pct = pct;
                eprint!("\rloading weights: {pct}%");
            }
        })
        .await?;
        eprintln!(
            "\rloaded {:.1} MB of weights in {:.2} s on {} ({})",
            model.weights.bytes as f64 / 1e6,
            start.elapsed().as_secs_f64(),
            model.gpu.adapter.name,
            model.gpu.adapter.backend
        );
        Ok(model)
    }

    async fn generate(args: GenerateArgs) -> Result<()> {
        let policy = args.policy.policy()?;
        let loaded = open(&args.model).await?;
        let (cfg, tokenizer) = match &loaded {
            Opened::Disk(c, t) => (c.config.clone(), t.as_ref().as_ref()),
            Opened::Synthetic(s) => (s.config.clone(), None),
        };
        // Prompts are checked against the config before any weight is read.
        let mut prompts: Vec<Vec<u32>> = Vec::new();
        for text in &args.prompt {
            let tok = tokenizer.ok_or_else(|| {
                Error::Invalid("--prompt needs tokenizer.json in the model folder (or use --prompt-ids)".into())
            })?;
            prompts.push(tok.chat_prompt(text, !args.no_think)?);
        }
        for ids in &args.prompt_ids {
            prompts.push(parse_ids(ids)?);
        }
        if prompts.is_empty() {
            return Err(Error::Invalid("pass --prompt TEXT or --prompt-ids 1,2,3".into()));
        }
        for prompt in &prompts {
            tokenmeter::engine::generate::check_prompt_fits(&cfg, prompt, args.max_new_tokens)?;
        }
        let draft = args.model.spec.open_draft(&cfg, tokenizer).await?;
        let model = match &loaded {
            Opened::Disk(c, _) => load(&args.model, c).await?,
            Opened::Synthetic(s) => load(&args.model, s).await?,
        };
        let requests = prompts
            .into_iter()
            .enumerate()
            .map(|(i, prompt)| Request {
                prompt,
                max_new_tokens: args.max_new_tokens,
                sampling: SamplingParams {
                    temperature: args.temperature,
                    top_k: args.top_k,
                    top_p: args.top_p,
                    seed: args.seed.wrapping_add(i as u64),
                },
                stop_ids: model.cfg.eos_token_ids.clone(),
                ignore_eos: args.ignore_eos,
            })
            .collect::<Vec<_>>();
        let single = requests.len() == 1;
        let options = engine_options(&args.model, args.model.max_batch);
        let mut engine = args.model.spec.engine(model, draft, &options).await?;
        engine.set_policy(policy)?;
        // With one prompt and a tokenizer, stream the text as it comes.
        let streaming = single && !args.json && tokenizer.is_some();
        let (mut so_far, mut shown) = (Vec::new(), 0);
        let done = run_requests(&mut engine, requests, &mut |e| {
            if let (true, Some(tok), EventKind::FirstToken { token } | EventKind::Token { token }) =
                (streaming, tokenizer, &e.kind)
            {
                so_far.push(*token);
                if let Ok(text) = tok.decode(&so_far) {
                    if text.len() > shown && !text.ends_with('\u{fffd}') {
                        eprint!("{}", &text[shown..]);
                        shown = text.len();
                    }
                }
            }
        })
        .await?;
        if streaming {
            eprintln!();
        }
        for c in done {
            let text = match tokenizer {
                Some(t) => Some(t.decode(&c.tokens)?),
                None => None,
            };
            if args.json {
                let mut line = serde_json::json!({
                    "id": c.id,
                    "prompt_ids": c.prompt_ids,
                    "tokens": c.tokens,
                    "ttft_ms": c.ttft_ms(),
                    "tpot_ms": if c.tokens.len() > 1 { serde_json::json!(c.tpot_ms()) } else { serde_json::Value::Null },
                    "finish": c.finish,
                    "preemptions": c.preemptions,
                    "cached_tokens": c.cached_tokens,
                });
                if let Some(text) = text {
                    line["text"] = text.into();
                }
                println!("{line}");
            } else {
                println!("[{}] prompt: {} tokens", c.id, c.prompt_ids.len());
                println!("[{}] tokens: {:?}", c.id, c.tokens);
                if let Some(text) = text {
                    println!("[{}] text: {text}", c.id);
                }
                println!(
                    "[{}] TTFT {:.2} ms, TPOT {:.2} ms over {} tokens ({:?})",
                    c.id,
                    c.ttft_ms(),
                    c.tpot_ms(),
                    c.tokens.len(),
                    c.finish.expect("finished")
                );
            }
        }
        Ok(())
    }

    impl BenchArgs {
        /// `--rate`: numbers or `inf`, comma-separated.
        fn rates(&self) -> Result<Vec<f64>> {
            self.rate
                .split(',')
                .map(|r| match r.trim() {
                    "inf" | "infinity" => Ok(f64::INFINITY),
                    r => r.parse::<f64>().map_err(|_| Error::Invalid(format!("--rate {r:?} is not a number or inf"))),
                })
                .collect()
        }

        /// The workload these options describe at `rate` (a dataset is attached later, once a
        /// tokenizer can measure it).
        fn workload(&self, rate: f64) -> Result<tokenmeter::bench::WorkloadSpec> {
            use tokenmeter::bench::{Arrival, ArrivalSpan, LenRange, WorkloadSpec};
            Ok(WorkloadSpec {
                arrival: self.arrival.parse::<Arrival>()?,
                rate,
                burstiness: self.burstiness,
                concurrency: self.concurrency,
                span: self.arrival_span.parse::<ArrivalSpan>()?,
                num_requests: self.num_requests.unwrap_or(32),
                input_len: self.input_len.parse::<LenRange>()?,
                output_len: self.output_len.parse::<LenRange>()?,
                seed: self.seed,
                dataset: None,
                max_concurrency: self.serving.max_concurrency,
                saturation_stop: !self.serving.no_saturation_stop,
                shared_prefix: self.shared_prefix()?,
            })
        }

        fn shared_prefix(&self) -> Result<Option<tokenmeter::bench::SharedPrefix>> {
            match (self.shared_prefix_len, self.prefix_groups) {
                (0, 1) => Ok(None),
                (0, _) => Err(Error::Invalid("--prefix-groups: goes with --shared-prefix-len".into())),
                (len, groups) => Ok(Some(tokenmeter::bench::SharedPrefix { len, groups })),
            }
        }
    }

    async fn bench(args: BenchArgs) -> Result<()> {
        use tokenmeter::bench::session::EngineTarget;
        use tokenmeter::bench::{self, RunConfig, SessionSpec, Slo, WorkloadSpec};
        let rates = args.rates()?;
        let mut spec = args.workload(rates[0])?;
        args.serving.save_format()?;
        let data = args.serving.read()?;
        if data.is_none() {
            bench::plan(&spec)?;
            for &rate in &rates {
                bench::plan(&WorkloadSpec { rate, ..spec.clone() })?;
            }
        }
        let slo = args.slo.as_deref().map(str::parse::<Slo>).transpose()?;
        let lang = args.lang.parse::<bench::Lang>()?;
        let policy = args.policy.policy()?;
        // Where the results go is checked before any work, so that a run is never lost to it.
        for (flag, path) in [("--json", &args.json), ("--csv", &args.csv), ("--html", &args.html)] {
            if let Some(path) = path {
                check_writable(flag, path)?;
            }
        }
        let session = |spec| SessionSpec {
            spec,
            rates: &rates,
            slo: slo.as_ref(),
            slo_text: args.slo.as_deref(),
            lang,
            baseline: !args.no_baseline,
            ignore_eos: !args.respect_eos,
        };
        let interrupt = Interrupt::on_ctrl_c();
        let listener = interrupt.listener(terminal_listener(lang));
        let mut results = Vec::new();
        if let Some(url) = &args.remote.endpoint {
            if args.model.model.is_some() || args.model.synthetic.is_some() {
                return Err(Error::Invalid(
                    "--endpoint benchmarks a server: drop --model/--synthetic (text prompts take --tokenizer)".into(),
                ));
            }
            if policy != tokenmeter::engine::Policy::default() {
                return Err(Error::Invalid(
                    "--policy, --no-chunked-prefill and --prefill-chunk set this engine's scheduler, not a server's"
                        .into(),
                ));
            }
            let tokenizer = remote::load_tokenizer(&args.remote)?;
            if let Some(data) = &data {
                let named = args.remote.tokenizer.as_ref().map(|p| format!("{} (--tokenizer)", p.display()));
                let measuring = tokenizer.as_ref().zip(named.as_deref());
                serving::attach(&mut spec, &rates, data, &args.serving, args.num_requests, measuring)?;
            }
            let session = session(&spec);
            let outcome = remote::run(
                &args.remote,
                url,
                &session,
                tokenizer,
                args.random_prompts,
                &listener,
                &interrupt,
                &mut results,
            )
            .await;
            return finish_bench(&args, &rates, &results, slo.as_ref(), outcome, &interrupt);
        }
        let loaded = open(&args.model).await?;
        let (cfg, tokenizer) = match &loaded {
            Opened::Disk(c, t) => (c.config.clone(), t.as_ref().as_ref()),
            Opened::Synthetic(s) => (s.config.clone(), None),
        };
        if let Some(data) = &data {
            let name = args.model.model.as_ref().map(|m| format!("the model's tokenizer.json ({})", m.display()));
            let measuring = tokenizer.zip(name.as_deref());
            serving::attach(&mut spec, &rates, data, &args.serving, args.num_requests, measuring)?;
        }
        policy.check_request(spec.input_len.max, spec.output_len.max, args.model.max_batched_tokens)?;
        let session = session(&spec);
        bench::check_context(spec.input_len, spec.output_len, cfg.max_position_embeddings)?;
        let draft = args.model.spec.open_draft(&cfg, tokenizer).await?;
        let model = match &loaded {
            Opened::Disk(c, _) => load(&args.model, c).await?,
            Opened::Synthetic(s) => load(&args.model, s).await?,
        };
        let prompts = bench::PromptSource::for_model(&spec, tokenizer, args.random_prompts, cfg.vocab_size);
        let prompt = |p: &bench::PlannedRequest| prompts.ids(p);
        let options = engine_options(&args.model, args.model.max_batch);
        let mut engine = args.model.spec.engine(model, draft, &options).await?;
        engine.set_policy(policy)?;
        let mut target = EngineTarget {
            engine: &mut engine,
            prompt: &prompt,
            sampling: SamplingParams::default(),
            describe: RunConfig {
                target: "local".into(),
                model: args.model.model.as_ref().map(|p| p.display().to_string()).or(args.model.synthetic.clone()),
                prompts: Some(prompts.kind().to_string()),
                ..RunConfig::default()
            },
            saturation: None,
        };
        let outcome = bench::session::run_into(&mut target, &session, &listener, &interrupt.cancel, &mut results).await;
        finish_bench(&args, &rates, &results, slo.as_ref(), outcome, &interrupt)
    }

    /// A run's end, however it ended: what was measured is written first (every finished rate,
    /// and the rate Ctrl-C or an error cut short), then the error, if any, is the exit status.
    /// A run in which no request succeeded is an error too, its results kept.
    fn finish_bench(
        args: &BenchArgs,
        rates: &[f64],
        results: &[tokenmeter::bench::BenchResult],
        slo: Option<&tokenmeter::bench::Slo>,
        outcome: Result<()>,
        interrupt: &Interrupt,
    ) -> Result<()> {
        let kept = if results.is_empty() { None } else { Some(write_results(args, rates, results, slo)) };
        let written = || {
            let paths: Vec<String> =
                [&args.json, &args.csv, &args.html].into_iter().flatten().map(|p| p.display().to_string()).collect();
            if results.is_empty() {
                "; nothing was measured".to_string()
            } else if paths.is_empty() {
                String::new()
            } else {
                format!("; what was measured is in {}", paths.join(" and "))
            }
        };
        match (outcome, kept) {
            (_, Some(Err(e))) => Err(e),
            (Err(e), Some(Ok(()))) => {
                eprintln!("note: the run stopped at an error{}", written());
                Err(e)
            }
            (Err(e), None) => Err(e),
            (Ok(()), _) if interrupt.fired() => {
                eprintln!("interrupted (Ctrl-C){}", written());
                Err(Error::Cancelled)
            }
            (Ok(()), _) => {
                let sent: usize = results.iter().map(|r| r.metrics.num_requests).sum();
                if sent > 0 && results.iter().all(|r| r.metrics.completed == 0) {
                    let mut kinds = std::collections::BTreeMap::new();
                    for (kind, n) in results.iter().flat_map(|r| &r.metrics.errors) {
                        *kinds.entry(kind.as_str()).or_insert(0) += n;
                    }
                    let kinds: Vec<String> = kinds.iter().map(|(kind, n)| format!("{kind} × {n}")).collect();
                    return Err(Error::Invalid(format!(
                        "none of the {sent} requests succeeded ({}){}",
                        kinds.join(", "),
                        written()
                    )));
                }
                Ok(())
            }
        }
    }

    /// `path` can be written (created, or appended to when it exists; nothing is truncated):
    /// checked before a run so that its results are not lost at the end.
    fn check_writable(flag: &str, path: &std::path::Path) -> Result<()> {
        let invalid = |why: String| Error::Invalid(format!("{flag} {}: {why}", path.display()));
        if path.is_dir() {
            return Err(invalid("is a folder; give a file name".into()));
        }
        let existed = path.exists();
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .map_err(|e| invalid(format!("cannot be written ({e})")))?;
        if !existed {
            let _ = std::fs::remove_file(path);
        }
        Ok(())
    }

    /// Ctrl-C during `bench`: the first stops the run (the session's `cancel`, and the remote
    /// client's own flag, since a server run has no engine steps to notice it at), so that what
    /// was measured is written; a second quits at once.
    pub struct Interrupt {
        pub flag: Arc<AtomicBool>,
        pub cancel: Rc<Cell<bool>>,
    }

    impl Interrupt {
        fn on_ctrl_c() -> Interrupt {
            let flag = Arc::new(AtomicBool::new(false));
            #[cfg(unix)]
            {
                let (ready_tx, ready_rx) = std::sync::mpsc::channel();
                let set = flag.clone();
                std::thread::spawn(move || {
                    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                        return;
                    };
                    runtime.block_on(async move {
                        use tokio::signal::unix::{signal, SignalKind};
                        let Ok(mut ctrl_c) = signal(SignalKind::interrupt()) else { return };
                        let _ = ready_tx.send(());
                        ctrl_c.recv().await;
                        set.store(true, Ordering::SeqCst);
                        eprintln!("\ninterrupted: stopping and keeping what was measured (Ctrl-C again quits now)");
                        ctrl_c.recv().await;
                        std::process::exit(130);
                    });
                });
                // The handler is in place before the run starts.
                let _ = ready_rx.recv_timeout(std::time::Duration::from_secs(2));
            }
            Interrupt { flag, cancel: Rc::new(Cell::new(false)) }
        }

        fn fired(&self) -> bool {
            self.flag.load(Ordering::SeqCst)
        }

        /// `inner`, which also passes a Ctrl-C on to the session (the engine's driver reads
        /// `cancel` after every step).
        fn listener(&self, inner: Listener) -> Listener {
            let (flag, cancel) = (self.flag.clone(), self.cancel.clone());
            Rc::new(move |event| {
                if flag.load(Ordering::SeqCst) {
                    cancel.set(true);
                }
                inner(event)
            })
        }
    }

    /// Prints the baseline, a progress bar per rate and each rate's report, as a session goes.
    fn terminal_listener(lang: tokenmeter::bench::Lang) -> Listener {
        let rate = Cell::new(0.0);
        let last_shown = Cell::new(usize::MAX);
        Rc::new(move |event| match event {
            SessionEvent::Baseline(b) => match &b.error {
                Some(e) => eprintln!("warning: {e}; the run goes on, without a diagnosis"),
                None => eprintln!("baseline (one request alone): TTFT {:.1} ms, TPOT {:.2} ms", b.ttft_ms, b.tpot_ms),
            },
            SessionEvent::RateStarted { rate: r, .. } => {
                rate.set(r);
                last_shown.set(usize::MAX);
            }
            SessionEvent::Progress(p) => {
                if p.finished != last_shown.get() {
                    last_shown.set(p.finished);
                    let bar = "#".repeat(30 * p.finished / p.total.max(1));
                    eprint!("\rrate {}: [{bar:<30}] {}/{}", rate.get(), p.finished, p.total);
                }
            }
            SessionEvent::RateDone { result, .. } => {
                eprintln!();
                let measured = tokenmeter::bench::Measured::of(&result.config);
                let report =
                    tokenmeter::bench::text_report_for(&result.metrics, result.diagnosis.as_ref(), lang, measured);
                print!("{report}");
                serving::warnings(result, lang);
            }
        })
    }

    /// The sweep table (several rates), the results JSON and the per-request CSV.
    fn write_results(
        args: &BenchArgs,
        rates: &[f64],
        results: &[tokenmeter::bench::BenchResult],
        slo: Option<&tokenmeter::bench::Slo>,
    ) -> Result<()> {
        if results.len() > 1 {
            print!("{}", sweep_table(rates, results, slo));
        }
        if let Some(path) = &args.json {
            let json = if args.serving.save_format()? == serving::SaveFormat::Vllm {
                // vLLM's layout: one object per rate, one per line (as its --append-result).
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
                let date = tokenmeter::bench::vllm::date_of_unix(now);
                let lines: Vec<String> =
                    results.iter().map(|r| tokenmeter::bench::vllm::result_json(r, &date).to_string()).collect();
                Ok(lines.join("\n") + "\n")
            } else if results.len() == 1 {
                serde_json::to_string_pretty(&results[0])
            } else {
                serde_json::to_string_pretty(&results)
            }
            .expect("serialisable");
            std::fs::write(path, json)
                .map_err(|e| Error::Io { path: path.display().to_string(), message: e.to_string() })?;
        }
        if let Some(path) = &args.csv {
            let rows: Vec<_> = results.iter().flat_map(|r| r.requests.iter().cloned()).collect();
            std::fs::write(path, tokenmeter::bench::csv(&rows))
                .map_err(|e| Error::Io { path: path.display().to_string(), message: e.to_string() })?;
        }
        if let Some(path) = &args.html {
            // The language was checked when the run began.
            let lang = args.lang.parse().unwrap_or_default();
            let model = results[0].config.model.clone().unwrap_or_else(|| "endpoint".to_string());
            let runs: Vec<(String, &tokenmeter::bench::BenchResult)> =
                rates.iter().zip(results).map(|(rate, r)| (format!("{model} · rate {rate} req/s"), r)).collect();
            std::fs::write(path, tokenmeter::bench::html::html_report(&runs, lang))
                .map_err(|e| Error::Io { path: path.display().to_string(), message: e.to_string() })?;
        }
        Ok(())
    }

    /// Rate -> throughput and latency table, and the knee: the highest rate whose p99 TTFT meets the
    /// SLO (with one), or the last rate before output throughput stops rising by 5%.
    fn sweep_table(
        rates: &[f64],
        results: &[tokenmeter::bench::BenchResult],
        slo: Option<&tokenmeter::bench::Slo>,
    ) -> String {
        let mut out = String::from("\n========== Sweep ==========\n");
        out += &format!(
            "{:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9}\n",
            "rate", "out tok/s", "req/s", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "goodput"
        );
        for (rate, r) in rates.iter().zip(results) {
            let m = &r.metrics;
            out += &format!(
                "{:>8} {:>10.1} {:>10.2} {:>10.1} {:>10.1} {:>10.2} {:>10.2} {:>9}\n",
                if rate.is_infinite() { "inf".to_string() } else { format!("{rate}") },
                m.output_throughput,
                m.request_throughput,
                m.ttft_ms.p50,
                m.ttft_ms.p99,
                m.tpot_ms.p50,
                m.tpot_ms.p99,
                m.goodput.map_or("-".to_string(), |g| format!("{g:.2}"))
            );
        }
        use tokenmeter::bench::sweep::{knee, KneeReason};
        let runs: Vec<_> = results.iter().map(|r| &r.metrics).collect();
        let knee = knee(&runs, slo.and_then(|s| s.ttft_ms)).map(|(i, reason)| {
            let why = match reason {
                KneeReason::MeetsTtftSlo => "highest rate meeting the p99 TTFT SLO",
                KneeReason::ThroughputFlattens => "throughput stops rising past this rate",
            };
            (i, why)
        });
        match knee {
            Some((i, why)) => out += &format!("knee: rate {} ({why})\n", rates[i]),
            None => out += "knee: no rate meets the SLO\n",
        }
        out
    }

    fn parse_ids(text: &str) -> Result<Vec<u32>> {
        let ids = text
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| s.parse::<u32>().map_err(|_| Error::Invalid(format!("--prompt-ids: {s:?} is not a token id"))))
            .collect::<Result<Vec<u32>>>()?;
        if ids.is_empty() {
            return Err(Error::Prompt("--prompt-ids is empty".into()));
        }
        Ok(ids)
    }
}
