//! The `tokenmeter` command line, a module per command; the model and engine flags (`ModelArgs`,
//! with the kernel and engine switches) are declared once, in [`model`], and shared by every
//! command that loads a model.

mod args;
mod bench;
mod compare;
mod experiment;
mod generate;
mod interrupt;
mod max_rate;
mod model;
mod plan;
mod policy;
mod quality;
mod remote;
mod rerun;
mod servers;
mod serving;
mod soak;
mod spec;
mod speed;
mod switches;
mod verify;

use clap::{Parser, Subcommand};
use tokenmeter::Error;

pub(crate) use args::{check_writable, BenchArgs};
pub(crate) use interrupt::Interrupt;
pub(crate) use model::{engine_options, open, Opened};

#[derive(Parser)]
// A flag given twice keeps its last value: `bench --rerun r.json --rate 8` overrides the saved rate.
#[command(name = "tokenmeter", version, about = "Qwen3 on WebGPU/Vulkan: generation and serving benchmarks")]
#[command(args_override_self = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Greedy generation for one or more prompts.
    Generate(generate::GenerateArgs),
    /// Serve a simulated workload (Poisson or other arrivals) and report TTFT, TPOT, ITL, throughput.
    Bench(Box<BenchArgs>),
    /// Show the GPU adapter and its limits.
    Adapter,
    /// Measure the adapter's copy bandwidth and FMA rate (and, natively, host memory copy bandwidth).
    Roofline,
    /// Engine speed vs the roofline: decode at several batch sizes, prefill at several lengths.
    Speed(speed::SpeedArgs),
    /// Thousands of requests under KV pressure, every event and KV block checked, memory watched.
    Soak(soak::SoakArgs),
    /// The same workload under two settings, alternately and repeatedly: B − A per metric with a
    /// confidence interval and a verdict (better, worse, no difference beyond --margin, or too few
    /// repetitions to tell and how many would).
    Compare(compare::CompareArgs),
    /// Capacity planning: bench's workload on the engine's own scheduler and batcher, timed by a
    /// step-cost model fitted on a saved run (--from RESULT.json), on a virtual clock — rates,
    /// batch sizes and policies never run, in seconds. --replay: predicted beside measured.
    Plan(Box<plan::PlanArgs>),
    /// The engine checks itself on this adapter: every matmul of the model's widths on the run's
    /// kernel path against the CPU, and the model's logits against the CPU oracle where it runs.
    Verify(verify::VerifyArgs),
}

pub fn main() -> i32 {
    quiet_headless_vulkan();
    let argv = match rerun::expand(std::env::args().collect()) {
        Ok(argv) => argv,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let cli = match Cli::try_parse_from(&argv) {
        Ok(c) => c,
        Err(e) if !e.use_stderr() || e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
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
        Command::Generate(args) => pollster::block_on(generate::main(args)),
        Command::Bench(mut args) => {
            let dataset_sha256 = match args.serving.dataset.as_deref().map(rerun::sha256_of).transpose() {
                Ok(digest) => digest,
                Err(e) => {
                    eprintln!("error: {e}");
                    return 2;
                }
            };
            let recorded = rerun::recorded(&argv[2..]);
            args.saved = Some(tokenmeter::bench::record::run_config::SavedRequest {
                command: "bench".into(),
                args: recorded,
                dataset_sha256,
            });
            pollster::block_on(bench::main(*args))
        }
        Command::Adapter => pollster::block_on(speed::adapter()),
        Command::Roofline => pollster::block_on(speed::roofline()),
        Command::Speed(args) => pollster::block_on(speed::main(args)),
        Command::Soak(args) => return soak::main(args),
        Command::Compare(args) => pollster::block_on(compare::main(args)),
        Command::Plan(args) => pollster::block_on(plan::main(*args)),
        Command::Verify(args) => pollster::block_on(verify::main(args)),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            // Several problems (a run request's) are a line each.
            for line in e.to_string().lines() {
                eprintln!("error: {line}");
            }
            match e {
                Error::Invalid(_) | Error::Prompt(_) => 2,
                Error::Cancelled => 130,    // Ctrl-C, as a shell reports it
                Error::QualityGate(_) => 3, // the run went well; a setting fell outside its bounds
                Error::InvalidRun(_) => 4,  // a decision rests on a run stamped INVALID (--require-valid)
                _ => 1,
            }
        }
    }
}

/// On a machine without a display session (no `XDG_RUNTIME_DIR`, no `WAYLAND_DISPLAY`), Mesa's
/// Vulkan device-select layer asks the Wayland client library for the compositor's GPU when the
/// GPU is opened (wgpu enables the window-system extensions), and the library prints `error:
/// XDG_RUNTIME_DIR is invalid or not set in the environment.` twice: not an error, in a tool whose
/// own errors start with `error:`. There is no compositor whose GPU could be picked, so the layer
/// is turned off (`NODEVICE_SELECT=1`, Mesa's switch) for this process, before any thread starts.
/// Kept when the user chose a device through it (`MESA_VK_DEVICE_SELECT`, `DRI_PRIME`) or set
/// `NODEVICE_SELECT` themselves; Vulkan's real errors are untouched.
fn quiet_headless_vulkan() {
    let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
    let headless = !set("XDG_RUNTIME_DIR") && !set("WAYLAND_DISPLAY");
    let chosen = ["MESA_VK_DEVICE_SELECT", "DRI_PRIME", "NODEVICE_SELECT"].iter().any(|name| set(name));
    if headless && !chosen {
        std::env::set_var("NODEVICE_SELECT", "1");
    }
}
