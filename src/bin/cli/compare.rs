//! `tokenmeter compare`: one workload under two `bench` settings, alternately (A B A B …), or two
//! saved results files; the statistics are `tokenmeter::bench::compare`'s.

use clap::{Args, Parser};
use std::path::PathBuf;
use tokenmeter::bench::compare::{text_report, CompareOptions};
use tokenmeter::bench::experiment::{self, Experiment, ExperimentSpec, Side};
use tokenmeter::bench::session::{EngineTarget, Listener};
use tokenmeter::bench::{self, BenchResult, PromptSource, RunConfig, Slo, WorkloadSpec};
use tokenmeter::engine::{Engine, SamplingParams};
use tokenmeter::limits::parse_count;
use tokenmeter::model::Tokenizer;
use tokenmeter::{Error, Result};

use super::{open, serving, BenchArgs, Opened};
use std::sync::Arc;
use tokenmeter::engine::{EngineOptions, ForwardPass};
use tokenmeter::gpu::Gpu;
use tokenmeter::model::TensorProvider;

#[derive(Args)]
pub struct CompareArgs {
    /// A's `bench` options in one string, e.g. "--synthetic qwen3-0.6b --max-batch 4 --rate 8".
    #[arg(long, allow_hyphen_values = true, required_unless_present = "a_json", conflicts_with = "a_json")]
    a: Option<String>,
    /// B's `bench` options: the same workload (seed, arrivals, lengths, SLOs) as A.
    #[arg(long, allow_hyphen_values = true, required_unless_present = "b_json", conflicts_with = "b_json")]
    b: Option<String>,
    /// Runs per side.
    #[arg(long, default_value_t = 5, allow_negative_numbers = true, value_parser = |s: &str| parse_count(s, 2, 100))]
    repeats: usize,
    /// A's saved results (a `bench --json` file; a list of results = one repetition each).
    #[arg(long, requires = "b_json")]
    a_json: Option<PathBuf>,
    /// B's saved results, of the same workload as A's.
    #[arg(long, requires = "a_json")]
    b_json: Option<PathBuf>,
    /// Write every repetition's result and the comparison here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Report language: en or zh.
    #[arg(long, default_value = "en")]
    lang: String,
}

/// `bench`'s options, parsed from one string.
#[derive(Parser)]
#[command(name = "bench", no_binary_name = true)]
struct SideArgs {
    #[command(flatten)]
    bench: BenchArgs,
}

fn parse_side(flag: &str, text: &str) -> Result<BenchArgs> {
    let side = SideArgs::try_parse_from(text.split_whitespace()).map_err(|e| {
        let text = e.render().to_string();
        let first: Vec<&str> = text.lines().map(str::trim).take_while(|l| !l.is_empty()).collect();
        Error::Invalid(format!("{flag}: {}", first.join(" ").trim_start_matches("error: ")))
    })?;
    let args = side.bench;
    let refuse = |what: &str| Err(Error::Invalid(format!("{flag}: {what}")));
    if args.remote.endpoint.is_some() {
        return refuse("compare runs the engine in this process; --endpoint is not supported here");
    }
    if args.json.is_some() || args.csv.is_some() {
        return refuse("--json and --csv go to compare itself, not inside --a/--b");
    }
    if args.rate.contains(',') {
        return refuse("one rate per comparison (a sweep is `bench --rate 1,2,4`)");
    }
    Ok(args)
}

/// The workload of `bench`'s options, as `bench` plans it: a dataset's lengths are measured by
/// the side's tokenizer (`loaded`'s, when it has one), as `bench` measures them.
fn workload(args: &BenchArgs, loaded: &Opened) -> Result<WorkloadSpec> {
    let rates = args.rates()?;
    let mut spec = args.workload(rates[0])?;
    if let Some(data) = args.serving.read()? {
        let tokenizer = match loaded {
            Opened::Disk(_, t) => t.as_ref().as_ref(),
            Opened::Synthetic(_) => None,
        };
        let name = args.model.model.as_ref().map(|m| format!("the model's tokenizer.json ({})", m.display()));
        serving::attach(&mut spec, &rates, &data, &args.serving, args.num_requests, tokenizer.zip(name.as_deref()))?;
    }
    bench::plan(&spec)?;
    Ok(spec)
}

/// One side, loaded: its engine and what its prompts are made with (as `bench` makes them).
struct Local {
    engine: Engine,
    tokenizer: Option<Tokenizer>,
    random_prompts: bool,
    vocab_size: usize,
    describe: RunConfig,
}

impl Local {
    /// Both sides load onto one GPU device: with a device each, lavapipe made one side's runs
    /// ~1.6× slower than the other's with identical settings (the idle device's threads compete).
    async fn load(args: &BenchArgs, loaded: Opened, spec: &WorkloadSpec, gpu: &Arc<Gpu>) -> Result<Local> {
        let policy = args.policy.policy()?;
        policy.check_request(spec.input_len.max, spec.output_len.max, args.model.max_batched_tokens)?;
        let options = super::engine_options(&args.model, args.model.max_batch);
        let draft = match &loaded {
            Opened::Disk(c, t) => args.model.spec.open_draft(&c.config, t.as_ref().as_ref()).await?,
            Opened::Synthetic(s) => args.model.spec.open_draft(&s.config, None).await?,
        };
        let (model, tokenizer, cfg) = match loaded {
            Opened::Disk(c, t) => (load_on(gpu, &options, &c).await?, *t, c.config.clone()),
            Opened::Synthetic(s) => (load_on(gpu, &options, &s).await?, None, s.config.clone()),
        };
        bench::check_context(spec.input_len, spec.output_len, cfg.max_position_embeddings)?;
        let mut engine = args.model.spec.engine(model, draft, &options).await?;
        engine.set_policy(policy)?;
        let (random_prompts, vocab_size) = (args.random_prompts, cfg.vocab_size);
        let prompts = PromptSource::for_model(spec, tokenizer.as_ref(), random_prompts, vocab_size);
        let describe = RunConfig {
            target: "local".into(),
            model: args.model.model.as_ref().map(|p| p.display().to_string()).or(args.model.synthetic.clone()),
            prompts: Some(prompts.kind().to_string()),
            ..RunConfig::default()
        };
        Ok(Local { engine, tokenizer, random_prompts, vocab_size, describe })
    }
}

pub async fn main(args: CompareArgs) -> Result<()> {
    let lang = args.lang.parse::<bench::Lang>()?;
    if let Some(path) = &args.json {
        super::check_writable("--json", path)?;
    }
    let experiment = match (&args.a_json, &args.b_json, &args.a, &args.b) {
        (Some(fa), Some(fb), _, _) => {
            let (a, b) = (read_results(fa)?, read_results(fb)?);
            let comparison = experiment::compare_results(&a, &b, None, &CompareOptions::default())?;
            Experiment { a, b, comparison }
        }
        (None, None, Some(a), Some(b)) => run(a, b, args.repeats, lang).await?,
        _ => return Err(Error::Invalid("pass --a and --b (bench options), or --a-json and --b-json".into())),
    };
    print!("{}", text_report(&experiment.comparison, lang));
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&experiment).expect("serialisable");
        std::fs::write(path, json)
            .map_err(|e| Error::Io { path: path.display().to_string(), message: e.to_string() })?;
    }
    Ok(())
}

async fn run(a: &str, b: &str, repeats: usize, lang: bench::Lang) -> Result<Experiment> {
    let (args_a, args_b) = (parse_side("--a", a)?, parse_side("--b", b)?);
    let (loaded_a, loaded_b) = (open(&args_a.model).await?, open(&args_b.model).await?);
    let (spec, spec_b) = (workload(&args_a, &loaded_a)?, workload(&args_b, &loaded_b)?);
    if spec != spec_b {
        return Err(Error::Invalid(format!(
            "--a and --b must run the same workload (arrivals, rate, lengths, seed): A {spec:?}, B {spec_b:?}"
        )));
    }
    if args_a.slo != args_b.slo
        || args_a.respect_eos != args_b.respect_eos
        || args_a.random_prompts != args_b.random_prompts
    {
        return Err(Error::Invalid(
            "--a and --b must agree on --slo, --respect-eos and --random-prompts (they define the workload)".into(),
        ));
    }
    let slo = args_a.slo.as_deref().map(str::parse::<Slo>).transpose()?;
    let gpu = Arc::new(Gpu::new().await?);
    let mut side_a = Local::load(&args_a, loaded_a, &spec, &gpu).await?;
    let mut side_b = Local::load(&args_b, loaded_b, &spec, &gpu).await?;
    let x = ExperimentSpec {
        spec: &spec,
        slo: slo.as_ref(),
        slo_text: args_a.slo.as_deref(),
        repeats,
        ignore_eos: !args_a.respect_eos,
        lang,
        warmup: true,
    };
    let cancel = std::rc::Rc::new(std::cell::Cell::new(false));
    let (total, done) = (2 * repeats, std::cell::Cell::new(0));
    eprintln!("warm-up: one run per side, not compared");
    let progress: Listener = std::rc::Rc::new(|_| {});
    let prompts_a = PromptSource::for_model(&spec, side_a.tokenizer.as_ref(), side_a.random_prompts, side_a.vocab_size);
    let prompts_b = PromptSource::for_model(&spec, side_b.tokenizer.as_ref(), side_b.random_prompts, side_b.vocab_size);
    let prompt_a = |p: &bench::PlannedRequest| prompts_a.ids(p);
    let prompt_b = |p: &bench::PlannedRequest| prompts_b.ids(p);
    let mut target_a = EngineTarget {
        engine: &mut side_a.engine,
        prompt: &prompt_a,
        sampling: SamplingParams::default(),
        describe: side_a.describe.clone(),
        saturation: None,
    };
    let mut target_b = EngineTarget {
        engine: &mut side_b.engine,
        prompt: &prompt_b,
        sampling: SamplingParams::default(),
        describe: side_b.describe.clone(),
        saturation: None,
    };
    experiment::run_alternating(&mut target_a, &mut target_b, &x, &progress, &cancel, &mut |side, i, result| {
        done.set(done.get() + 1);
        let m = &result.metrics;
        eprintln!(
            "[{}/{total}] {} run {}: output {:.1} tok/s, TTFT p50 {:.1} ms, TPOT p50 {:.2} ms, {} of {} requests completed",
            done.get(),
            if side == Side::A { "A" } else { "B" },
            i + 1,
            m.output_throughput,
            m.ttft_ms.p50,
            m.tpot_ms.p50,
            m.completed,
            m.num_requests
        );
    })
    .await
}

/// A `bench --json` file: one result, or a list (one repetition each).
fn read_results(path: &std::path::Path) -> Result<Vec<BenchResult>> {
    let io = |e: String| Error::Io { path: path.display().to_string(), message: e };
    let meta = std::fs::metadata(path).map_err(|e| io(e.to_string()))?;
    if !meta.is_file() {
        return Err(io("not a regular file".into()));
    }
    if meta.len() > tokenmeter::limits::RESULTS_JSON_MAX_BYTES {
        return Err(io(format!(
            "{} bytes, above the {} byte limit",
            meta.len(),
            tokenmeter::limits::RESULTS_JSON_MAX_BYTES
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| io(e.to_string()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| Error::Invalid(format!("{}: not JSON ({e})", path.display())))?;
    let parsed = if value.is_array() {
        serde_json::from_value::<Vec<BenchResult>>(value)
    } else {
        serde_json::from_value::<BenchResult>(value).map(|r| vec![r])
    };
    parsed.map_err(|e| Error::Invalid(format!("{}: not a bench results file ({e})", path.display())))
}

/// `bench`'s engine options (with its --weights and --speculate), loaded on `gpu`.
async fn load_on<P: TensorProvider>(gpu: &Arc<Gpu>, options: &EngineOptions, src: &P) -> Result<ForwardPass> {
    let model = ForwardPass::load(gpu.clone(), src, options, &mut |_, _| {}).await?;
    eprintln!("loaded {:.1} MB of weights on {}", model.weights.bytes as f64 / 1e6, model.gpu.adapter.name);
    Ok(model)
}
