//! `tokenmeter-dawn`: the page's engine and benchmark code without a page, in Node on Dawn (Chrome's
//! WebGPU: the `webgpu` npm package's dawn.node), run by `scripts/dawn-run SUBCOMMAND ARGS`. It
//! takes the CLI's arguments for `adapter`, `roofline` and `speed` (a synthetic shape; the kernel
//! switches), and prints the JSON `tokenmeter` prints, so the two compare row for row on the same
//! GPU (`scripts/device-check`). Natively there is nothing to run.

#[cfg(target_arch = "wasm32")]
mod dawn {
    use std::collections::BTreeMap;
    use tokenmeter::bench::speed::{self, SpeedPlan};
    use tokenmeter::engine::{Engine, EngineOptions, ForwardPass};
    use tokenmeter::gpu::kernels::KernelSwitches;
    use tokenmeter::gpu::{Gpu, SharedGpu};
    use tokenmeter::limits::{self, parse_count};
    use tokenmeter::model::synthetic::SyntheticModel;
    use tokenmeter::model::Qwen3Config;
    use wasm_bindgen::prelude::*;

    /// The flags each subcommand takes (each `--name VALUE`); the kernel switches are the page's
    /// link keys, which are the CLI's flag names.
    const SPEED_FLAGS: [&str; 16] = [
        "synthetic",
        "batches",
        "prefill",
        "prefill-repeats",
        "steps",
        "context",
        "max-batched-tokens",
        "kv-blocks",
        "weights",
        "kernels",
        "weight-storage",
        "subgroups",
        "matmul-tile",
        "fused",
        "prefill-tiles",
        "gemv-max-m",
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
        let (command, rest) = args.split_first().ok_or("usage: dawn-run adapter|roofline|speed ARGS")?;
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
            "speed" => speed(flags(rest, &SPEED_FLAGS)?).await,
            other => Err(format!("unknown subcommand {:?} (adapter, roofline, speed)", limits::printable(other))),
        }
    }

    async fn speed(flags: BTreeMap<String, String>) -> Result<String, String> {
        let get = |k: &str| flags.get(k).cloned();
        let name = get("synthetic").ok_or("speed needs --synthetic NAME (model files are not read here)")?;
        let cfg = Qwen3Config::preset(&name).ok_or_else(|| {
            format!(
                "unknown synthetic model {:?} (one of {})",
                limits::printable(&name),
                Qwen3Config::PRESETS.join(", ")
            )
        })?;
        let plan = SpeedPlan {
            batches: counts(&get("batches").unwrap_or(speed::DEFAULT_BATCHES.into()), limits::MAX_SEQS)?,
            prefill: counts(&get("prefill").unwrap_or(speed::DEFAULT_PREFILL.into()), limits::MAX_BATCHED_TOKENS)?,
            steps: get("steps").map_or(Ok(speed::DEFAULT_STEPS), |v| parse_count(&v, 1, limits::MAX_SPEED_STEPS))?,
            prefill_repeats: get("prefill-repeats")
                .map_or(Ok(speed::DEFAULT_PREFILL_REPEATS), |v| parse_count(&v, 1, limits::MAX_SPEED_STEPS))?,
            context: get("context").map_or(Ok(speed::DEFAULT_CONTEXT), |v| parse_count(&v, 1, limits::MAX_TOKENS))?,
            profile: false,
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
        let model = ForwardPass::load(gpu, &source, &options, &mut |_, _| {}).await.map_err(|e| e.to_string())?;
        let log = |line: String| web_sys::console::error_1(&line.into());
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
