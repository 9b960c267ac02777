//! `tokenmeter compare`: one workload under two or more `bench` settings, in turn (A B C A B C …),
//! or saved results files; each setting against the reference, with the statistics of
//! `tokenmeter::bench::verdict::compare` (intervals that hold for every setting and metric together).

use clap::{Args, CommandFactory, FromArgMatches, Parser};
use std::path::PathBuf;
use tokenmeter::bench::run::experiment::{self, Arm, ManyWay};
use tokenmeter::bench::run::launch::{self, OnEngine};
use tokenmeter::bench::verdict::compare::{text_report, text_report_named, CompareOptions};
use tokenmeter::bench::verdict::quality::{self, Quality};
use tokenmeter::bench::{self, BenchResult, PromptSource, RunConfig, Slo, WorkloadSpec};
use tokenmeter::engine::trial::{Trial, TrialPlan};
use tokenmeter::engine::Engine;
use tokenmeter::limits::parse_count;
use tokenmeter::model::Tokenizer;
use tokenmeter::{Error, Result};

use super::experiment::{experiment_spec, same_workload, timed};
use super::model::ModelArgs;
use super::policy::PolicyArgs;
use super::quality::{passes as quality_passes, Oracle, PromptsOf, QualityArgs, Settings};
use super::{open, serving, BenchArgs, Opened};
use std::sync::Arc;
use tokenmeter::engine::{EngineOptions, ForwardPass};
use tokenmeter::gpu::Gpu;
use tokenmeter::model::TensorProvider;

#[derive(Args)]
pub struct CompareArgs {
    /// A's `bench` options in one string, e.g. "--synthetic qwen3-0.6b --max-batch 4 --rate 8"
    /// (the setting named A; the same as `--config A=…`).
    #[arg(long, allow_hyphen_values = true, requires = "b")]
    a: Option<String>,
    /// B's `bench` options: the same workload (seed, arrivals, lengths, SLOs) as A.
    #[arg(long, allow_hyphen_values = true, requires = "a")]
    b: Option<String>,
    /// A named setting, NAME=OPTIONS (`bench`'s options in one string); repeat it for two or more.
    /// Every setting runs the same workload, in turn; each is compared with the reference.
    #[arg(long = "config", value_name = "NAME=OPTIONS", allow_hyphen_values = true)]
    configs: Vec<String>,
    /// Runs per setting.
    #[arg(long, default_value_t = 5, allow_negative_numbers = true, value_parser = |s: &str| parse_count(s, 2, 100))]
    repeats: usize,
    /// A's saved results (a `bench --json` file; a list of results = one repetition each).
    #[arg(long, requires = "b_json")]
    a_json: Option<PathBuf>,
    /// B's saved results, of the same workload as A's.
    #[arg(long, requires = "a_json")]
    b_json: Option<PathBuf>,
    /// A named setting's saved results, NAME=FILE (as --a-json); repeat it for two or more.
    #[arg(long = "results", value_name = "NAME=FILE")]
    results: Vec<String>,
    /// The setting the others are compared with (default: the first).
    #[arg(long)]
    reference: Option<String>,
    /// Write every repetition's result and the comparisons here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Refuse a comparison that rests on a run stamped INVALID (too few requests for its SLO's
    /// percentile, a load not delivered, failures…): exit code 4, after the report and files.
    #[arg(long)]
    require_valid: bool,
    /// Write an HTML report here: the settings' trade-off (Pareto chart) and each one's last run.
    #[arg(long)]
    html: Option<PathBuf>,
    /// Report language: en or zh.
    #[arg(long, default_value = "en")]
    lang: String,
    /// The equivalence margin, in % of the reference's value: a metric whose whole interval lies
    /// within ± this reads "no difference larger than" it; one whose interval includes 0 but
    /// reaches beyond it reads "too few repetitions to tell", with the repetitions that would.
    #[arg(long, default_value_t = 100.0 * tokenmeter::bench::verdict::compare::MARGIN, value_parser = parse_margin)]
    margin: f64,
    #[command(flatten)]
    quality: QualityArgs,
}

/// `--margin`: a percentage from 0 to 100.
fn parse_margin(text: &str) -> std::result::Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(pct) if (0.0..=100.0).contains(&pct) => Ok(pct),
        _ => Err(format!("{text:?}: expected a percentage from 0 to 100")),
    }
}

/// Names are how settings are told apart in the report and the JSON: short, printable, distinct.
const NAME_MAX_CHARS: usize = 40;

/// "NAME=VALUE" pairs of `flag`, checked: two or more, names printable and distinct.
fn named<'a>(flag: &str, pairs: &'a [String]) -> Result<Vec<(String, &'a str)>> {
    let mut out: Vec<(String, &str)> = Vec::new();
    for pair in pairs {
        let (name, value) =
            pair.split_once('=').ok_or_else(|| Error::Invalid(format!("{flag} {pair:?}: expected NAME=VALUE")))?;
        let name = name.trim();
        if name.is_empty() || name.chars().count() > NAME_MAX_CHARS || name.chars().any(char::is_control) {
            return Err(Error::Invalid(format!(
                "{flag} {pair:?}: a name is 1 to {NAME_MAX_CHARS} printable characters"
            )));
        }
        if out.iter().any(|(n, _)| n == name) {
            return Err(Error::Invalid(format!("{flag}: the name {name:?} is used twice")));
        }
        out.push((name.to_string(), value));
    }
    if out.len() < 2 {
        return Err(Error::Invalid(format!("{flag}: give two or more settings (one is nothing to compare)")));
    }
    Ok(out)
}

/// `bench`'s options, parsed from one string.
#[derive(Parser)]
#[command(name = "bench", no_binary_name = true)]
struct SideArgs {
    #[command(flatten)]
    bench: BenchArgs,
}

fn parse_side(flag: &str, text: &str) -> Result<BenchArgs> {
    let clap_error = |e: clap::Error| {
        let text = e.render().to_string();
        let first: Vec<&str> = text.lines().map(str::trim).take_while(|l| !l.is_empty()).collect();
        Error::Invalid(format!("{flag}: {}", first.join(" ").trim_start_matches("error: ")))
    };
    let matches = SideArgs::command().try_get_matches_from(text.split_whitespace()).map_err(clap_error)?;
    let args = SideArgs::from_arg_matches(&matches).map_err(clap_error)?.bench;
    let refuse = |what: &str| Err(Error::Invalid(format!("{flag}: {what}")));
    let engine = engine_flags_given(&matches);
    if args.remote.endpoint.is_some() && !engine.is_empty() {
        return refuse(&format!(
            "{} set the engine in this process, and --endpoint makes this setting a server: a setting is one or the \
             other (drop {})",
            engine.join(", "),
            if engine.len() == 1 { "it" } else { "them" }
        ));
    }
    if args.json.is_some() || args.csv.is_some() {
        return refuse("--json and --csv go to compare itself, not inside a setting");
    }
    if args.rate.contains(',') {
        return refuse("one rate per comparison (a sweep is `bench --rate 1,2,4`)");
    }
    Ok(args)
}

/// The engine's flags (the model, its loading and scheduling, `--no-verify`) that `matches` took
/// from the setting's text, as `--name`.
fn engine_flags_given(matches: &clap::ArgMatches) -> Vec<String> {
    let engine = PolicyArgs::augment_args(ModelArgs::augment_args(clap::Command::new("engine")));
    let ids = engine.get_arguments().map(|a| (a.get_id().as_str().to_string(), a.get_long().map(str::to_string)));
    ids.chain(std::iter::once(("no_verify".to_string(), Some("no-verify".to_string()))))
        .filter(|(id, _)| matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine))
        .map(|(id, long)| format!("--{}", long.unwrap_or(id)))
        .collect()
}

/// The workload of `bench`'s options, as `bench` plans it: a dataset's lengths are measured by
/// the side's tokenizer (`loaded`'s, when it has one), as `bench` measures them.
fn workload(args: &BenchArgs, loaded: &Opened) -> Result<WorkloadSpec> {
    let request = args.request_at_rates("compare")?;
    let (rates, mut spec) = (request.rates, request.spec);
    if let Some(data) = args.serving.read()? {
        let (tokenizer, context) = match loaded {
            Opened::Disk(c, t) => (t.as_ref().as_ref(), c.config.max_position_embeddings),
            Opened::Synthetic(s) => (None, s.config.max_position_embeddings),
        };
        let name = args.model.model.as_ref().map(|m| format!("the model's tokenizer.json ({})", m.display()));
        let measuring = tokenizer.zip(name.as_deref());
        let given = args.num_requests.is_some().then_some(spec.num_requests);
        serving::attach(&mut spec, &rates, &data, &args.serving, given, measuring, Some(context))?;
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
    async fn load(
        args: &BenchArgs,
        loaded: Opened,
        spec: &WorkloadSpec,
        gpu: &Arc<Gpu>,
        first_trial: Option<&Trial>,
    ) -> Result<Local> {
        let policy = args.policy.policy()?;
        let options = super::engine_options(&args.model, args.model.max_batch);
        let draft = match &loaded {
            Opened::Disk(c, t) => args.model.spec.open_draft(&c.config, t.as_ref().as_ref()).await?,
            Opened::Synthetic(s) => args.model.spec.open_draft(&s.config, None).await?,
        };
        let (mut model, tokenizer, cfg) = match loaded {
            Opened::Disk(c, t) => (load_on(gpu, &options, &c).await?, *t, c.config.clone()),
            Opened::Synthetic(s) => (load_on(gpu, &options, &s).await?, None, s.config.clone()),
        };
        args.check_loaded(spec, cfg.max_position_embeddings)?;
        // The first side runs the kernels a trial picks, as `bench` would; the others take its
        // choices where their switches leave them open (`trial::adopt`), so that the sides differ
        // only in what the user changed.
        match first_trial {
            None => {
                let trial = TrialPlan::new(&[spec.input_len.min, spec.input_len.max], args.model.max_batch);
                super::model::choose_kernels(&args.model, &mut model, &trial).await?;
            }
            Some(first) => {
                tokenmeter::engine::trial::adopt(&mut model, first, &args.model.switches.kernels()).await?;
            }
        }
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
    for (flag, path) in [("--json", &args.json), ("--html", &args.html)] {
        if let Some(path) = path {
            super::check_writable(flag, path)?;
        }
    }
    let ways = [!args.configs.is_empty(), !args.results.is_empty(), args.a.is_some(), args.a_json.is_some()];
    if ways.iter().filter(|&&w| w).count() != 1 {
        return Err(Error::Invalid(
            "pass the settings one way: --config NAME=OPTIONS (two or more), --results NAME=FILE (two or more), \
             --a and --b, or --a-json and --b-json"
                .into(),
        ));
    }
    let pair = |a: &str, b: &str| vec![format!("A={a}"), format!("B={b}")];
    let saved_results = args.a_json.is_some() || !args.results.is_empty();
    if saved_results && (args.quality.asked() || args.quality.no_quality) {
        return Err(Error::Invalid(
            "the quality flags need settings run here (--config or --a/--b): saved results hold no model".into(),
        ));
    }
    let (arms, passes) = if let (Some(a), Some(b)) = (&args.a_json, &args.b_json) {
        (saved(&named("--a-json/--b-json", &pair(&a.display().to_string(), &b.display().to_string()))?)?, Vec::new())
    } else if !args.results.is_empty() {
        (saved(&named("--results", &args.results)?)?, Vec::new())
    } else {
        let (configs, ab) = match (&args.a, &args.b) {
            (Some(a), Some(b)) => (pair(a, b), true),
            _ => (args.configs.clone(), false),
        };
        let configs = named("--config", &configs)?;
        let names: Vec<&str> = configs.iter().map(|(n, _)| n.as_str()).collect();
        let reference = reference_index(&names, args.reference.as_deref())?;
        run(&configs, ab, reference, args.repeats, &args.quality, lang).await?
    };
    let names: Vec<&str> = arms.iter().map(|a| a.name.as_str()).collect();
    let reference = reference_index(&names, args.reference.as_deref())?;
    let options = CompareOptions { margin: args.margin / 100.0, ..CompareOptions::default() };
    let mut experiment = experiment::compare_arms(&arms, reference, None, &options)?;
    experiment.quality = passes;
    print!("{}", many_way_report(&experiment, lang));
    for run in &experiment.invalid {
        println!("! {}", run.text(lang));
    }
    if !experiment.quality.is_empty() {
        print!("\n{}", quality::text_report(&experiment.quality, lang));
    }
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&experiment).expect("serialisable");
        std::fs::write(path, json)
            .map_err(|e| Error::Io { path: path.display().to_string(), message: e.to_string() })?;
    }
    if let Some(path) = &args.html {
        let last: Vec<(String, &BenchResult)> =
            experiment.arms.iter().filter_map(|a| Some((a.name.clone(), a.runs.last()?))).collect();
        let sections = quality::html_section(&experiment.quality, lang);
        std::fs::write(path, tokenmeter::bench::present::html::html_report_with(&last, &sections, lang))
            .map_err(|e| Error::Io { path: path.display().to_string(), message: e.to_string() })?;
    }
    // Last, so that a failing gate or an invalid run still leaves the report and the files.
    args.quality.gate().check(&experiment.quality)?;
    if args.require_valid && !experiment.invalid.is_empty() {
        let lines: Vec<String> = experiment.invalid.iter().map(|run| run.text(bench::Lang::En)).collect();
        return Err(Error::InvalidRun(format!("--require-valid: {}", lines.join("\n"))));
    }
    Ok(())
}

/// The index of the setting named `wanted` (default: the first).
fn reference_index(names: &[&str], wanted: Option<&str>) -> Result<usize> {
    match wanted {
        None => Ok(0),
        Some(name) => names.iter().position(|n| *n == name).ok_or_else(|| {
            Error::Invalid(format!("--reference {name:?}: no setting of that name (there are {})", names.join(", ")))
        }),
    }
}

/// Each setting against the reference: a summary line per metric across all of them, then each
/// comparison in full.
fn many_way_report(x: &ManyWay, lang: bench::Lang) -> String {
    if x.versus.len() == 1 && x.reference == "A" && x.versus[0].name == "B" {
        return text_report(&x.versus[0].comparison, lang);
    }
    let mut out = summary_table(x, lang);
    for v in &x.versus {
        out += "\n";
        out += &text_report_named(&v.comparison, lang, &v.reference, &v.name);
    }
    out
}

/// metric | reference | each other setting's value, change and verdict (columns as wide as
/// their widest cell).
fn summary_table(x: &ManyWay, lang: bench::Lang) -> String {
    let zh = lang == bench::Lang::Zh;
    let mut out = if zh {
        format!("========== {} 组设置，参照：{} ==========\n", x.arms.len(), x.reference)
    } else {
        format!("========== {} settings against {} ==========\n", x.arms.len(), x.reference)
    };
    let Some(first) = x.versus.first() else { return out };
    let mut rows: Vec<Vec<String>> = vec![std::iter::once(if zh { "指标" } else { "metric" }.to_string())
        .chain(std::iter::once(x.reference.clone()))
        .chain(x.versus.iter().map(|v| v.name.clone()))
        .collect()];
    for (k, m) in first.comparison.metrics.iter().enumerate() {
        let mut row = vec![m.metric.clone(), format!("{:.3}", m.a)];
        for v in &x.versus {
            let n = &v.comparison.metrics[k];
            row.push(format!("{:.3} ({:+.1}%) {}", n.b, n.diff_pct, n.verdict_text(v.comparison.margin, lang)));
        }
        rows.push(row);
    }
    let widths: Vec<usize> =
        (0..rows[0].len()).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, &w))| if c == 0 { format!("{cell:<w$}") } else { format!("{cell:>w$}") })
            .collect();
        out += cells.join("  ").trim_end();
        out += "\n";
    }
    out
}

/// Runs the settings in turn, then the quality passes against setting `reference`. `ab`: they came
/// as --a and --b (errors name those flags).
async fn run(
    configs: &[(String, &str)],
    ab: bool,
    reference: usize,
    repeats: usize,
    quality_args: &QualityArgs,
    lang: bench::Lang,
) -> Result<(Vec<Arm>, Vec<Quality>)> {
    let mut args = Vec::new();
    for (name, text) in configs {
        let flag = if ab { format!("--{}", name.to_lowercase()) } else { format!("--config {name}") };
        args.push(parse_side(&flag, text)?);
    }
    let servers: Vec<&str> =
        configs.iter().zip(&args).filter(|(_, a)| a.remote.endpoint.is_some()).map(|((n, _), _)| n.as_str()).collect();
    if servers.len() == args.len() {
        return super::servers::run(configs, &args, reference, repeats, quality_args, lang).await;
    }
    if !servers.is_empty() {
        return Err(Error::Invalid(format!(
            "{} {} a server (--endpoint) and the others the engine in this process: compare settings of one kind \
             (the engine's times include no HTTP, a server's do; and their outputs compare as token ids against \
             text)",
            servers.join(", "),
            if servers.len() == 1 { "is" } else { "are" }
        )));
    }
    if quality_args.quality_top_k.is_some() {
        return Err(Error::Invalid(
            "--quality-top-k is for servers (they return a top-k); the engine's pass compares whole distributions"
                .into(),
        ));
    }
    let mut specs = Vec::new();
    let mut opened = Vec::new();
    for a in &args {
        let loaded = open(&a.model).await?;
        specs.push(workload(a, &loaded)?);
        opened.push(loaded);
    }
    same_workload(configs, &args, &specs)?;
    let (first, spec) = (&args[0], specs[0].clone());
    let slo = first.slo.as_deref().map(str::parse::<Slo>).transpose()?;
    // The oracle first: a model it cannot hold is refused before any run.
    let mut oracle = None;
    if quality_args.quality_oracle {
        oracle = Some(Oracle::load(&opened[reference], args[reference].model.weights).await?);
    }
    let gpu = Arc::new(Gpu::new().await?);
    let mut locals = Vec::new();
    for (a, loaded) in args.iter().zip(opened) {
        let first: Option<&Local> = locals.first();
        let first_trial = first.and_then(|l| l.engine.model.trial.clone());
        locals.push(Local::load(a, loaded, &spec, &gpu, first_trial.as_ref()).await?);
    }
    let x = experiment_spec(first, &spec, slo.as_ref(), repeats, lang)?;
    // The engines are borrowed mutably by the targets, the tokenizers by the prompts: apart.
    let (mut engines, sides): (Vec<Engine>, Vec<_>) =
        locals.into_iter().map(|l| (l.engine, (l.tokenizer, l.random_prompts, l.vocab_size, l.describe))).unzip();
    let on: Vec<OnEngine> = engines
        .iter_mut()
        .zip(&sides)
        .map(|(engine, (tokenizer, random, _, describe))| {
            OnEngine::new(engine, tokenizer.as_ref(), *random, describe.clone())
        })
        .collect();
    let arms = launch::with_targets(on, &spec, async |targets| timed(targets, configs, &x).await).await?;
    let models: Vec<Option<String>> = sides.iter().map(|side| side.3.model.clone()).collect();
    let names: Vec<&str> = configs.iter().map(|(name, _)| name.as_str()).collect();
    let settings = Settings { names, models, engines: &mut engines, reference };
    // The quality pass starts from the reference's prompts, made as its timed runs' were.
    let (tokenizer, random, vocab, _) = &sides[reference];
    let prompts = PromptSource::for_model(&spec, tokenizer.as_ref(), *random, *vocab);
    let made_with = PromptsOf { spec: &spec, prompts: &prompts, tokenizer: tokenizer.as_ref(), vocab: *vocab };
    let passes = quality_passes(quality_args, settings, made_with, oracle).await?;
    Ok((arms, passes))
}

/// Each named file's results (`bench --json`), as an arm.
fn saved(files: &[(String, &str)]) -> Result<Vec<Arm>> {
    files
        .iter()
        .map(|(name, path)| Ok(Arm { name: name.clone(), runs: read_results(std::path::Path::new(path))? }))
        .collect()
}

/// A `bench --json` file: one result, or a list (one repetition each).
pub(crate) fn read_results(path: &std::path::Path) -> Result<Vec<BenchResult>> {
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
