//! A run's GPU energy: power and energy read during the run — from a DCGM exporter's Prometheus
//! text (`--gpu-metrics-url`, scraped by the server metrics' loop into the same samples) or from
//! NVML on the engine's own GPU — made into average power, energy and joules per output token over
//! the window the readings span. Pure: readings and records in, [`Energy`] out.
//!
//! Two bases, the better first: the energy counter's growth over the window (DCGM's
//! `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`, NVML's `nvmlDeviceGetTotalEnergyConsumption`), whose
//! average power is that energy over the window's duration; else the power gauge's time-average
//! (trapezoids between readings), whose energy is that average times the duration. A figure
//! nothing supports is absent ("–" in the report, `null` in the JSON), with the reason, never 0.

use serde::{Deserialize, Serialize};

use crate::bench::measure::server_metrics::{ServerMetrics, ServerSample};
use crate::bench::record::raw::RequestRecord;
use crate::gpu::nvml::{self, Nvml};

/// Where the readings came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EnergySource {
    /// A DCGM exporter's Prometheus text, all the GPUs it reports.
    Dcgm,
    /// NVML, the engine's GPU in this process.
    Nvml,
}

/// What the figures rest on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnergyBasis {
    /// The energy counter's growth between the first and the last reading.
    EnergyCounter,
    /// The time-average of the power gauge's readings.
    PowerGauge,
}

/// A run's raw readings, kept in the results (`gpu_metrics`) so the figures can be recomputed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuReadings {
    pub source: EnergySource,
    /// The exporter's URL, or which GPU NVML read and how it was picked.
    pub from: String,
    /// Readings on the run's clock (`gpu_power_w`, `gpu_energy_mj`, `gpus`), failed scrapes.
    pub readings: ServerMetrics,
    /// Why nothing could be read at all (NVML absent), when so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

/// The run's energy, over the window its readings span.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Energy {
    pub source: EnergySource,
    pub from: String,
    pub basis: Option<EnergyBasis>,
    /// From the first to the last reading the figures use, s.
    pub window_s: Option<f64>,
    /// Summed over the GPUs, W.
    pub avg_power_w: Option<f64>,
    pub energy_j: Option<f64>,
    /// Output tokens produced within the window.
    pub output_tokens: usize,
    pub j_per_output_token: Option<f64>,
    /// GPUs summed (the exporter's label sets; 1 for NVML).
    pub gpus: Option<usize>,
    /// Readings answered, and those that failed with the first reason.
    pub readings: usize,
    pub failed_readings: usize,
    pub first_error: Option<String>,
    /// Why the figures are absent, when they are.
    pub unavailable: Option<String>,
    /// The figures are over the run's measured phase alone (warm-up and cool-down left out, as
    /// the summary leaves them out); false: over every reading of the run.
    #[serde(default)]
    pub measured_phase: bool,
}

impl Energy {
    /// The figures of `gpu`'s readings over `measured` (the measured phase, on the run's clock)
    /// when at least two readings fall within it, else over them all; the output tokens of
    /// `records` timed within the span the figures use.
    pub fn of(gpu: &GpuReadings, records: &[RequestRecord], measured: Option<(f64, f64)>) -> Energy {
        if let Some((from, to)) = measured {
            let within = |s: &&ServerSample| s.t_s >= from && s.t_s <= to;
            let samples: Vec<ServerSample> = gpu.readings.samples.iter().filter(within).cloned().collect();
            let narrowed = GpuReadings { readings: ServerMetrics { samples, ..gpu.readings.clone() }, ..gpu.clone() };
            let e = Energy::over_readings(&narrowed, records);
            if e.unavailable.is_none() {
                return Energy { measured_phase: true, ..e };
            }
        }
        Energy::over_readings(gpu, records)
    }

    fn over_readings(gpu: &GpuReadings, records: &[RequestRecord]) -> Energy {
        let r = &gpu.readings;
        let mut e = Energy {
            source: gpu.source,
            from: gpu.from.clone(),
            basis: None,
            window_s: None,
            avg_power_w: None,
            energy_j: None,
            output_tokens: 0,
            j_per_output_token: None,
            gpus: r.samples.iter().filter_map(|s| s.gpus).max(),
            readings: r.samples.len(),
            failed_readings: r.failed_scrapes,
            first_error: r.first_error.clone(),
            unavailable: None,
            measured_phase: false,
        };
        let of = |f: fn(&ServerSample) -> Option<f64>| -> Vec<(f64, f64)> {
            r.samples.iter().filter_map(|s| Some((s.t_s, f(s)?))).collect()
        };
        let (energy, power) = (of(|s| s.gpu_energy_mj), of(|s| s.gpu_power_w));
        let figures = match (counter_growth(&energy), gauge_average(&power)) {
            (Some((from, to, joules)), _) => Some((EnergyBasis::EnergyCounter, from, to, joules)),
            (None, Some((from, to, watts))) => Some((EnergyBasis::PowerGauge, from, to, watts * (to - from))),
            (None, None) => None,
        };
        let Some((basis, from, to, joules)) = figures else {
            e.unavailable = Some(gpu.unavailable.clone().or_else(|| r.first_error.clone()).unwrap_or_else(|| {
                format!(
                    "fewer than two readings of GPU energy or power ({} answered, {} with energy, {} with power)",
                    r.samples.len(),
                    energy.len(),
                    power.len()
                )
            }));
            return e;
        };
        e.output_tokens = output_tokens_within(records, from, to);
        e.basis = Some(basis);
        e.window_s = Some(to - from);
        e.energy_j = Some(joules);
        e.avg_power_w = Some(joules / (to - from));
        e.j_per_output_token = (e.output_tokens > 0).then(|| joules / e.output_tokens as f64);
        e
    }
}

/// The counter's first and last reading's times and its growth in J; `None` with fewer than two
/// readings, no time between them, or a counter that went back (a GPU reset or left).
fn counter_growth(mj: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
    let (&(t0, first), &(t1, last)) = (mj.first()?, mj.last()?);
    (t1 > t0 && last >= first).then(|| (t0, t1, (last - first) / 1e3))
}

/// The gauge's time-average over its readings (trapezoids), with the first and last time.
fn gauge_average(w: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
    let (&(t0, _), &(t1, _)) = (w.first()?, w.last()?);
    if t1 <= t0 {
        return None;
    }
    let area: f64 = w.windows(2).map(|p| 0.5 * (p[0].1 + p[1].1) * (p[1].0 - p[0].0)).sum();
    Some((t0, t1, area / (t1 - t0)))
}

/// Output tokens timed within `[from, to]`; a record without token times counts its output
/// when it finished within.
fn output_tokens_within(records: &[RequestRecord], from: f64, to: f64) -> usize {
    let within = |t: f64| t >= from && t <= to;
    records
        .iter()
        .map(|r| match r.token_times_s.is_empty() {
            false => r.timed_tokens().filter(|&(t, _)| within(t)).map(|(_, n)| n).sum(),
            true => r.finish_s.filter(|&t| within(t)).map_or(0, |_| r.output_len),
        })
        .sum()
}

/// The engine's GPU read through NVML at a run's start and end (an energy counter needs no more):
/// loaded once, when the CLI makes the engine's target.
pub struct NvmlMeter {
    nvml: Result<(Nvml, u32), String>,
    from: String,
    start: Option<(f64, Result<ServerSample, String>)>,
    last: Option<GpuReadings>,
}

impl NvmlMeter {
    /// NVML's GPU that is the adapter named `adapter`; absent NVML is a reason kept for the
    /// results, not an error.
    pub fn for_adapter(adapter: &str) -> NvmlMeter {
        Self::open(Nvml::load(), adapter)
    }

    /// A meter over `nvml` as it loaded (or did not).
    pub fn open(nvml: Result<Nvml, String>, adapter: &str) -> NvmlMeter {
        let picked = nvml.and_then(|n| nvml::pick(&n, adapter).map(|(index, how)| ((n, index), how)));
        let (nvml, from) = match picked {
            Ok((n, how)) => (Ok(n), how),
            Err(why) => (Err(why), "the engine's GPU".to_string()),
        };
        NvmlMeter { nvml, from, start: None, last: None }
    }

    fn read(&self, t_s: f64) -> Result<ServerSample, String> {
        let (nvml, index) = self.nvml.as_ref().map_err(Clone::clone)?;
        let energy = nvml.energy_mj(*index);
        let power = nvml.power_mw(*index);
        if let (Err(e), Err(_)) = (&energy, &power) {
            return Err(e.clone());
        }
        Ok(ServerSample {
            t_s,
            gpu_energy_mj: energy.ok().map(|mj| mj as f64),
            gpu_power_w: power.ok().map(|mw| mw as f64 / 1e3),
            gpus: Some(1),
            ..ServerSample::default()
        })
    }

    /// Reads at a run's start, `now_s` on the run's clock.
    pub fn start(&mut self, now_s: f64) {
        self.start = Some((now_s, self.read(0.0)));
    }

    /// Reads at the run's end and keeps the run's readings for [`NvmlMeter::take`].
    pub fn stop(&mut self, now_s: f64) {
        let Some((started_s, first)) = self.start.take() else { return };
        let mut readings = ServerMetrics { url: "nvml".into(), ..ServerMetrics::default() };
        for reading in [first, self.read(now_s - started_s)] {
            match reading {
                Ok(s) => readings.samples.push(s),
                Err(why) => readings.fail(why),
            }
        }
        let unavailable = self.nvml.as_ref().err().cloned();
        self.last = Some(GpuReadings { source: EnergySource::Nvml, from: self.from.clone(), readings, unavailable });
    }

    /// The last run's readings; taken once.
    pub fn take(&mut self) -> Option<GpuReadings> {
        self.last.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readings(samples: Vec<ServerSample>) -> GpuReadings {
        let readings = ServerMetrics { url: "http://dcgm:9400/metrics".into(), samples, ..ServerMetrics::default() };
        GpuReadings { source: EnergySource::Dcgm, from: readings.url.clone(), readings, unavailable: None }
    }

    fn at(t_s: f64, power_w: Option<f64>, energy_mj: Option<f64>) -> ServerSample {
        ServerSample { t_s, gpu_power_w: power_w, gpu_energy_mj: energy_mj, gpus: Some(2), ..ServerSample::default() }
    }

    fn record(times: &[f64]) -> RequestRecord {
        RequestRecord { token_times_s: times.to_vec(), output_len: times.len(), ..RequestRecord::default() }
    }

    #[test]
    fn the_counter_is_preferred_and_tokens_count_within_the_window() {
        // 500 W for 2 s by the counter (1,000,000 mJ), while the gauge says 480 W.
        let gpu = readings(vec![
            at(0.5, Some(480.0), Some(5_000_000.0)),
            at(1.5, Some(480.0), None),
            at(2.5, Some(480.0), Some(6_000_000.0)),
        ]);
        // 4 tokens within [0.5, 2.5], 2 outside.
        let e = Energy::of(&gpu, &[record(&[0.4, 0.6, 1.0]), record(&[2.0, 2.5, 2.6])], None);
        assert_eq!(e.basis, Some(EnergyBasis::EnergyCounter));
        assert_eq!((e.window_s, e.energy_j, e.avg_power_w), (Some(2.0), Some(1000.0), Some(500.0)));
        assert_eq!((e.output_tokens, e.j_per_output_token), (4, Some(250.0)));
        assert_eq!((e.gpus, e.readings, e.unavailable), (Some(2), 3, None));
    }

    #[test]
    fn a_measured_phase_narrows_the_window_when_two_readings_fall_in_it() {
        // The counter grows 100 J a second, then 300 J a second from 2 s (the measured phase's load).
        let gpu = readings(vec![
            at(0.0, None, Some(0.0)),
            at(1.0, None, Some(100_000.0)),
            at(2.0, None, Some(200_000.0)),
            at(3.0, None, Some(500_000.0)),
            at(4.0, None, Some(800_000.0)),
        ]);
        let tokens = [record(&[0.5, 1.5, 2.5, 3.0, 3.5, 4.5])];
        let e = Energy::of(&gpu, &tokens, Some((1.8, 4.2)));
        // Readings at 2, 3 and 4 s: 600 J over 2 s; tokens at 2.5, 3.0 and 3.5 s.
        assert_eq!((e.window_s, e.energy_j, e.avg_power_w), (Some(2.0), Some(600.0), Some(300.0)));
        assert_eq!((e.output_tokens, e.j_per_output_token, e.measured_phase), (3, Some(200.0), true));
        // One reading in the phase: the whole run's figures, and said so.
        let e = Energy::of(&gpu, &tokens, Some((2.5, 3.5)));
        assert_eq!((e.window_s, e.energy_j, e.output_tokens, e.measured_phase), (Some(4.0), Some(800.0), 5, false));
    }

    #[test]
    fn without_a_counter_the_gauge_is_time_averaged() {
        // Trapezoids: 1 s at (400 + 600) / 2, then 3 s at 600: 2300 J over 4 s.
        let gpu = readings(vec![at(0.0, Some(400.0), None), at(1.0, Some(600.0), None), at(4.0, Some(600.0), None)]);
        let e = Energy::of(&gpu, &[record(&[1.0])], None);
        assert_eq!(e.basis, Some(EnergyBasis::PowerGauge));
        assert_eq!((e.energy_j, e.avg_power_w, e.j_per_output_token), (Some(2300.0), Some(575.0), Some(2300.0)));
    }

    #[test]
    fn too_few_readings_or_a_counter_going_back_leave_figures_absent_with_a_reason() {
        let mut gpu = readings(vec![at(0.0, None, Some(10.0))]);
        gpu.readings.fail("http 404".into());
        let e = Energy::of(&gpu, &[record(&[0.0])], None);
        assert_eq!((e.energy_j, e.avg_power_w, e.j_per_output_token, e.basis), (None, None, None, None));
        assert_eq!(e.unavailable.as_deref(), Some("http 404"));
        assert_eq!(e.failed_readings, 1);

        let reset = readings(vec![at(0.0, None, Some(10.0)), at(1.0, None, Some(5.0))]);
        let e = Energy::of(&reset, &[], None);
        assert!(e.energy_j.is_none() && e.unavailable.as_deref().is_some_and(|w| w.contains("fewer than two")));
    }

    #[test]
    fn absent_nvml_gives_a_reason_and_no_figures() {
        let mut meter = NvmlMeter::open(Nvml::load_from("libtokenmeter-no-such-nvml.so.1"), "NVIDIA H200");
        meter.start(10.0);
        meter.stop(12.0);
        let gpu = meter.take().expect("a run's readings, even when empty");
        assert!(meter.take().is_none(), "taken once");
        let e = Energy::of(&gpu, &[record(&[1.0])], None);
        assert_eq!((e.source, e.energy_j, e.avg_power_w, e.j_per_output_token), (EnergySource::Nvml, None, None, None));
        let why = e.unavailable.expect("a reason");
        assert!(why.contains("libtokenmeter-no-such-nvml.so.1"), "{why}");
    }
}
