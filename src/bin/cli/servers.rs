//! `compare` with servers as its settings (`--config NAME="--endpoint URL …"`): each runs the
//! same workload, in turn, through the benchmark's remote path (`ServerTarget`, as `bench
//! --endpoint` runs it), and after the timed runs each deployment is measured against the
//! reference's output quality from the servers' own answers (`quality::server_passes`).

use tokenmeter::bench::run::experiment::Arm;
use tokenmeter::bench::verdict::quality::Quality;
use tokenmeter::bench::{self, PromptSource, Slo, WorkloadSpec};
use tokenmeter::model::Tokenizer;
use tokenmeter::remote::native::{Client, ServerTarget};
use tokenmeter::Result;

use super::experiment::{experiment_spec, same_workload, timed};
use super::quality::{server_passes, QualityArgs, Server};
use super::{remote, serving, BenchArgs};
use tokenmeter::bench::base::rules::problems_error;

/// Runs the server settings in turn, then the quality passes against setting `reference`.
pub(crate) async fn run(
    configs: &[(String, &str)],
    args: &[BenchArgs],
    reference: usize,
    repeats: usize,
    quality_args: &QualityArgs,
    lang: bench::Lang,
) -> Result<(Vec<Arm>, Vec<Quality>)> {
    let mut tokenizers = Vec::new();
    let mut specs = Vec::new();
    let mut servers = Vec::new();
    for ((name, _), a) in configs.iter().zip(args) {
        let named = |e: tokenmeter::Error| tokenmeter::Error::Invalid(format!("--config {name}: {e}"));
        let request = a.request().map_err(named)?;
        let problems = request.server_problems(a.remote.tokenizer.is_some());
        if !problems.is_empty() {
            return Err(named(problems_error(&problems)));
        }
        let tokenizer = remote::load_tokenizer(&a.remote)?;
        specs.push(workload(a, tokenizer.as_ref())?);
        tokenizers.push(tokenizer);
        servers.push(
            request
                .target
                .server()
                .cloned()
                .ok_or_else(|| named(tokenmeter::Error::Invalid("not a server (no --endpoint)".into())))?,
        );
    }
    same_workload(configs, args, &specs)?;
    let (first, spec) = (&args[0], specs[0].clone());
    let slo = first.slo.as_deref().map(str::parse::<Slo>).transpose()?;
    let mut clients: Vec<Client> = Vec::new();
    for ((a, tokenizer), server) in args.iter().zip(&tokenizers).zip(&servers) {
        clients.push(remote::connect(&a.remote, server, tokenizer.is_some())?);
    }
    let prompts: Vec<PromptSource> = args
        .iter()
        .zip(&tokenizers)
        .zip(&clients)
        .map(|((a, tokenizer), client)| {
            remote::prompt_source(&a.remote, &spec, tokenizer.as_ref(), a.random_prompts, client)
        })
        .collect();
    // One closure expression: one type, so they fit in one Vec.
    let prompt_fns: Vec<_> = prompts.iter().map(|p| move |r: &bench::PlannedRequest| p.prompt(r)).collect();
    let mut targets: Vec<ServerTarget> = args
        .iter()
        .zip(&clients)
        .zip(&prompts)
        .zip(&prompt_fns)
        .map(|(((a, client), prompts), prompt)| ServerTarget {
            client,
            setup: remote::setup(&a.remote, prompt, prompts.kind()),
        })
        .collect();
    let x = experiment_spec(first, &spec, slo.as_ref(), repeats, lang)?;
    let arms = timed(&mut targets, configs, &x).await?;
    drop(targets);
    let servers: Vec<Server> = configs
        .iter()
        .zip(args)
        .zip(&clients)
        .zip(&prompts)
        .map(|((((name, _), a), client), prompts)| Server { name, client, prompts, timeout_s: a.remote.timeout_s })
        .collect();
    let passes = server_passes(quality_args, &servers, reference, &spec, !first.respect_eos)?;
    Ok((arms, passes))
}

/// The workload of a server setting's options, as `bench --endpoint` plans it: a dataset's lengths
/// are measured by its `--tokenizer`.
fn workload(args: &BenchArgs, tokenizer: Option<&Tokenizer>) -> Result<WorkloadSpec> {
    let request = args.request()?;
    let (rates, mut spec) = (request.rates, request.spec);
    if let Some(data) = args.serving.read()? {
        let named = args.remote.tokenizer.as_ref().map(|p| format!("{} (--tokenizer)", p.display()));
        let measuring = tokenizer.zip(named.as_deref());
        let given = args.num_requests.is_some().then_some(spec.num_requests);
        serving::attach(&mut spec, &rates, &data, &args.serving, given, measuring, None)?;
    }
    bench::plan(&spec)?;
    Ok(spec)
}
