//! The `tokenmeter` command line: the engine and (later) the benchmark, headless, on the first
//! GPU adapter (lavapipe on machines without a GPU).

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    std::process::exit(cli::main());
}

#[cfg(not(target_arch = "wasm32"))]
mod cli {
    use clap::{Args, Parser, Subcommand};
    use std::sync::Arc;
    use tokenmeter::engine::{generate_greedy, Model, ModelOptions};
    use tokenmeter::gpu::Gpu;
    use tokenmeter::model::checkpoint::Checkpoint;
    use tokenmeter::model::source::DirStore;
    use tokenmeter::model::synthetic::SyntheticModel;
    use tokenmeter::model::{ModelStore, Qwen3Config, TensorProvider, Tokenizer};
    use tokenmeter::{Error, Result};

    #[derive(Parser)]
    #[command(
        name = "tokenmeter",
        version,
        about = "Qwen3 on WebGPU/Vulkan: generation and serving benchmarks"
    )]
    struct Cli {
        #[command(subcommand)]
        command: Command,
    }

    #[derive(Subcommand)]
    enum Command {
        /// Greedy generation for one or more prompts.
        Generate(GenerateArgs),
        /// Show the GPU adapter and its limits.
        Adapter,
    }

    #[derive(Args)]
    struct ModelArgs {
        /// A Hugging Face model folder: config.json, *.safetensors (or sharded with an index), tokenizer.json.
        #[arg(long, conflicts_with = "synthetic")]
        model: Option<std::path::PathBuf>,
        /// Random weights with a published shape: qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b.
        #[arg(long)]
        synthetic: Option<String>,
        /// Tokens per engine step (prefill chunk).
        #[arg(long, default_value_t = 512)]
        max_batched_tokens: usize,
        /// KV cache blocks (default: as many as 512 MiB and the adapter allow).
        #[arg(long)]
        kv_blocks: Option<usize>,
        /// Tokens per KV block.
        #[arg(long, default_value_t = 16)]
        block_size: usize,
    }

    #[derive(Args)]
    struct GenerateArgs {
        #[command(flatten)]
        model: ModelArgs,
        /// A user message; the Qwen3 chat template is applied. Repeatable.
        #[arg(long)]
        prompt: Vec<String>,
        /// Raw prompt token ids, comma separated. Repeatable.
        #[arg(long)]
        prompt_ids: Vec<String>,
        #[arg(long, default_value_t = 32)]
        max_new_tokens: usize,
        /// Keep going past end-of-sequence tokens.
        #[arg(long)]
        ignore_eos: bool,
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
            Err(e) => {
                let _ = e.print();
                return if e.use_stderr() { 2 } else { 0 };
            }
        };
        let result = match cli.command {
            Command::Generate(args) => pollster::block_on(generate(args)),
            Command::Adapter => pollster::block_on(adapter()),
        };
        match result {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("error: {e}");
                match e {
                    Error::Invalid(_) | Error::Prompt(_) => 2,
                    _ => 1,
                }
            }
        }
    }

    async fn adapter() -> Result<()> {
        let gpu = Gpu::new().await?;
        println!(
            "{}",
            serde_json::to_string_pretty(&gpu.adapter).expect("serialisable")
        );
        Ok(())
    }

    enum Loaded {
        Disk(
            Checkpoint<tokenmeter::model::source::DiskFile>,
            Box<Option<Tokenizer>>,
        ),
        Synthetic(SyntheticModel),
    }

    async fn open(args: &ModelArgs) -> Result<Loaded> {
        match (&args.model, &args.synthetic) {
            (Some(dir), _) => {
                let store = DirStore::new(dir)?;
                let checkpoint = Checkpoint::open(&store).await?;
                let tokenizer = match store.read_all("tokenizer.json").await? {
                    Some(bytes) => Some(Tokenizer::from_bytes(&bytes)?),
                    None => None,
                };
                Ok(Loaded::Disk(checkpoint, Box::new(tokenizer)))
            }
            (None, Some(name)) => {
                let cfg = Qwen3Config::preset(name).ok_or_else(|| {
                    Error::Invalid(format!(
                        "unknown synthetic model {name:?} (one of {})",
                        Qwen3Config::PRESETS.join(", ")
                    ))
                })?;
                Ok(Loaded::Synthetic(SyntheticModel::new(cfg, 0)))
            }
            (None, None) => Err(Error::Invalid(
                "pass --model DIR or --synthetic NAME".into(),
            )),
        }
    }

    async fn load<P: TensorProvider>(args: &ModelArgs, src: &P) -> Result<Model> {
        let gpu = Arc::new(Gpu::new().await?);
        let options = ModelOptions {
            max_batched_tokens: args.max_batched_tokens,
            block_size: args.block_size,
            kv_blocks: args.kv_blocks,
            ..ModelOptions::default()
        };
        let start = std::time::Instant::now();
        let mut last_pct = 0;
        let model = Model::load(gpu, src, &options, &mut |done, total| {
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
        let loaded = open(&args.model).await?;
        let (cfg, tokenizer) = match &loaded {
            Loaded::Disk(c, t) => (c.config.clone(), t.as_ref().as_ref()),
            Loaded::Synthetic(s) => (s.config.clone(), None),
        };
        // Prompts are checked against the config before any weight is read.
        let mut prompts: Vec<Vec<u32>> = Vec::new();
        for text in &args.prompt {
            let tok = tokenizer.ok_or_else(|| {
                Error::Invalid(
                    "--prompt needs tokenizer.json in the model folder (or use --prompt-ids)"
                        .into(),
                )
            })?;
            prompts.push(tok.chat_prompt(text, !args.no_think)?);
        }
        for ids in &args.prompt_ids {
            prompts.push(parse_ids(ids)?);
        }
        if prompts.is_empty() {
            return Err(Error::Invalid(
                "pass --prompt TEXT or --prompt-ids 1,2,3".into(),
            ));
        }
        for prompt in &prompts {
            tokenmeter::engine::generate::check_prompt_fits(&cfg, prompt, args.max_new_tokens)?;
        }
        let mut model = match &loaded {
            Loaded::Disk(c, _) => load(&args.model, c).await?,
            Loaded::Synthetic(s) => load(&args.model, s).await?,
        };
        let stop: Vec<u32> = if args.ignore_eos {
            vec![]
        } else {
            model.cfg.eos_token_ids.clone()
        };
        for prompt in prompts {
            tokenmeter::engine::generate::check_prompt(&model, &prompt, args.max_new_tokens)?;
            let streaming = !args.json && tokenizer.is_some();
            let mut shown = 0;
            let mut so_far = Vec::new();
            let g = generate_greedy(
                &mut model,
                &prompt,
                args.max_new_tokens,
                &stop,
                &mut |_, id| {
                    so_far.push(id);
                    if let (true, Some(tok)) = (streaming, tokenizer) {
                        if let Ok(text) = tok.decode(&so_far) {
                            if text.len() > shown && !text.ends_with('\u{fffd}') {
                                eprint!("{}", &text[shown..]);
                                shown = text.len();
                            }
                        }
                    }
                },
            )
            .await?;
            let text = match tokenizer {
                Some(t) => Some(t.decode(&g.tokens)?),
                None => None,
            };
            if args.json {
                let mut line = serde_json::json!({
                    "prompt_ids": g.prompt_ids,
                    "tokens": g.tokens,
                    "ttft_ms": g.ttft_ms(),
                    "tpot_ms": if g.tokens.len() > 1 { serde_json::json!(g.tpot_ms()) } else { serde_json::Value::Null },
                });
                if let Some(text) = text {
                    line["text"] = text.into();
                }
                println!("{line}");
            } else {
                if streaming {
                    eprintln!();
                }
                println!("prompt: {} tokens", g.prompt_ids.len());
                println!("tokens: {:?}", g.tokens);
                if let Some(text) = text {
                    println!("text: {text}");
                }
                println!(
                    "TTFT {:.2} ms, TPOT {:.2} ms over {} tokens",
                    g.ttft_ms(),
                    g.tpot_ms(),
                    g.tokens.len()
                );
            }
        }
        Ok(())
    }

    fn parse_ids(text: &str) -> Result<Vec<u32>> {
        let ids = text
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<u32>()
                    .map_err(|_| Error::Invalid(format!("--prompt-ids: {s:?} is not a token id")))
            })
            .collect::<Result<Vec<u32>>>()?;
        if ids.is_empty() {
            return Err(Error::Prompt("--prompt-ids is empty".into()));
        }
        Ok(ids)
    }
}
