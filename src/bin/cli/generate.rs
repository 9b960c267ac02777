//! `tokenmeter generate`: greedy (or sampled) generation for one or more prompts, concurrently.

use super::model::{engine_options, load_timed, open_timed, ModelArgs, Opened};
use super::policy;
use clap::Args;
use tokenmeter::engine::{generate as run_requests, EventKind, Request, SamplingParams};
use tokenmeter::limits::{self, parse_count, parse_number};
use tokenmeter::{Error, Result};

#[derive(Args)]
pub(crate) struct GenerateArgs {
    #[command(flatten)]
    pub(crate) model: ModelArgs,
    #[command(flatten)]
    pub(crate) policy: policy::PolicyArgs,
    /// A user message; the Qwen3 chat template is applied. Repeatable.
    #[arg(long)]
    pub(crate) prompt: Vec<String>,
    /// Raw prompt token ids, comma separated. Repeatable.
    #[arg(long)]
    pub(crate) prompt_ids: Vec<String>,
    #[arg(long, default_value_t = 32, allow_negative_numbers = true,
          value_parser = |s: &str| parse_count(s, 1, limits::MAX_TOKENS))]
    pub(crate) max_new_tokens: usize,
    /// Keep going past end-of-sequence tokens.
    #[arg(long)]
    pub(crate) ignore_eos: bool,
    /// 0 = greedy.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true,
          value_parser = |s: &str| parse_number(s, 0.0, limits::MAX_TEMPERATURE).map(|x| x as f32))]
    pub(crate) temperature: f32,
    /// 0 = off.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true,
          value_parser = |s: &str| parse_count(s, 0, limits::MAX_VOCAB).map(|k| k as u32))]
    pub(crate) top_k: u32,
    /// 1 = off.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true,
          value_parser = |s: &str| parse_number(s, 0.0, 1.0).map(|p| p as f32))]
    pub(crate) top_p: f32,
    /// Seed of the first prompt's sampler (prompt i uses seed + i).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub(crate) seed: u64,
    /// With --prompt: add the empty think block (enable_thinking=False).
    #[arg(long)]
    pub(crate) no_think: bool,
    /// One JSON line per prompt.
    #[arg(long)]
    pub(crate) json: bool,
}

pub(crate) async fn main(args: GenerateArgs) -> Result<()> {
    let policy = args.policy.policy()?;
    let (loaded, before) = open_timed(&args.model).await?;
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
    let lens: Vec<usize> = prompts.iter().map(Vec::len).collect();
    let trial = tokenmeter::engine::trial::TrialPlan::new(&lens, prompts.len().min(args.model.max_batch));
    let (model, ready) = load_timed(&args.model, &loaded, before, &trial).await?;
    for line in ready.lines(tokenmeter::bench::Lang::En) {
        eprintln!("{line}");
    }
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
            println!("{}", c.json_line(text));
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

pub(crate) fn parse_ids(text: &str) -> Result<Vec<u32>> {
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
