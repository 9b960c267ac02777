//! What to send and when: arrival times and prompt/output lengths, planned up front from a seed
//! so two runs of the same spec send the same requests (their contents: [`crate::bench::prompts`]).
//! Arrival processes follow vLLM's `benchmarks/serve.py`, so rate and burstiness mean the same
//! as in server benchmarks.

use std::str::FromStr;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp, Gamma};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::limits;

/// How requests are released.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrival {
    /// Open loop, exponential gaps with mean 1/rate.
    Poisson,
    /// Open loop, gamma gaps: burstiness < 1 clusters requests, > 1 evens them out.
    Gamma,
    /// Open loop, exactly 1/rate apart.
    Constant,
    /// Closed loop, one request at a time.
    Sequential,
    /// Closed loop, `concurrency` requests in flight.
    Concurrency,
}

impl FromStr for Arrival {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "poisson" => Ok(Arrival::Poisson),
            "gamma" => Ok(Arrival::Gamma),
            "constant" => Ok(Arrival::Constant),
            "sequential" => Ok(Arrival::Sequential),
            "concurrency" => Ok(Arrival::Concurrency),
            _ => Err(Error::Invalid(format!(
                "arrival {s:?}: expected poisson, gamma, constant, sequential or concurrency"
            ))),
        }
    }
}

/// An inclusive token-count range; "128" means exactly 128, "64:512" anything from 64 to 512.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LenRange {
    pub min: usize,
    pub max: usize,
}

impl LenRange {
    pub fn validate(&self) -> Result<()> {
        if self.min < 1 {
            return Err(Error::Invalid("length range: the minimum must be at least 1".into()));
        }
        if self.min > self.max {
            return Err(Error::Invalid(format!(
                "length range {}:{}: the minimum is above the maximum",
                self.min, self.max
            )));
        }
        if self.max > limits::MAX_TOKENS {
            return Err(Error::Invalid(format!(
                "length range {}:{}: above the limit of {} tokens",
                self.min,
                self.max,
                limits::MAX_TOKENS
            )));
        }
        Ok(())
    }
}

impl FromStr for LenRange {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let number = |part: &str| {
            part.trim().parse::<usize>().map_err(|_| {
                Error::Invalid(format!(
                    "length range {s:?}: {part:?} is not a token count (expected \"128\" or \"64:512\")"
                ))
            })
        };
        let range = match s.split_once(':') {
            Some((min, max)) => LenRange { min: number(min)?, max: number(max)? },
            None => {
                let exact = number(s)?;
                LenRange { min: exact, max: exact }
            }
        };
        range.validate()?;
        Ok(range)
    }
}

/// Everything that decides which requests a benchmark sends and when.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkloadSpec {
    pub arrival: Arrival,
    /// Requests per second for the open-loop arrivals; infinity sends everything at t = 0
    /// (written as `null` in JSON).
    #[serde(with = "infinity_as_null")]
    pub rate: f64,
    /// Gamma shape; 1 is Poisson.
    pub burstiness: f64,
    /// Requests in flight for [`Arrival::Concurrency`].
    pub concurrency: usize,
    pub num_requests: usize,
    pub input_len: LenRange,
    pub output_len: LenRange,
    pub seed: u64,
}

impl WorkloadSpec {
    /// The spec's rules and [`crate::limits`]' bounds; each message starts with the field it is
    /// about (the page puts it next to that field).
    pub fn validate(&self) -> Result<()> {
        if self.rate.is_nan() || self.rate < limits::MIN_RATE {
            return Err(Error::Invalid(format!(
                "rate {}: must be at least {} requests/s (or infinite: all at once)",
                limits::show(self.rate),
                limits::MIN_RATE
            )));
        }
        if !(limits::MIN_BURSTINESS..=limits::MAX_BURSTINESS).contains(&self.burstiness) {
            return Err(Error::Invalid(format!(
                "burstiness {}: must be a number from {} to {} (1 = Poisson)",
                limits::show(self.burstiness),
                limits::MIN_BURSTINESS,
                limits::MAX_BURSTINESS
            )));
        }
        if self.arrival == Arrival::Concurrency && !(1..=limits::MAX_CONCURRENCY).contains(&self.concurrency) {
            return Err(Error::Invalid(format!(
                "concurrency {}: must be from 1 to {}",
                self.concurrency,
                limits::MAX_CONCURRENCY
            )));
        }
        if !(1..=limits::MAX_REQUESTS).contains(&self.num_requests) {
            return Err(Error::Invalid(format!(
                "number of requests {}: must be from 1 to {}",
                self.num_requests,
                limits::MAX_REQUESTS
            )));
        }
        let open_loop = !matches!(self.arrival, Arrival::Sequential | Arrival::Concurrency);
        let mean_span_s = (self.num_requests - 1) as f64 / self.rate;
        if open_loop && mean_span_s > limits::MAX_SCHEDULE_S {
            return Err(Error::Invalid(format!(
                "rate {}: {} requests would arrive over about {} s, above the limit of {} s",
                limits::show(self.rate),
                self.num_requests,
                limits::show(mean_span_s.round()),
                limits::MAX_SCHEDULE_S
            )));
        }
        self.input_len.validate()?;
        self.output_len.validate()
    }
}

/// One request of the plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannedRequest {
    pub id: u64,
    /// Seconds from the start; `None` when the closed loop releases it (sequential, concurrency).
    pub arrival_s: Option<f64>,
    pub prompt_len: usize,
    pub output_len: usize,
}

/// The whole benchmark's requests. Lengths come from their own random stream, so changing the
/// arrival process or the rate keeps every request's lengths.
pub fn plan(spec: &WorkloadSpec) -> Result<Vec<PlannedRequest>> {
    spec.validate()?;
    let mut length_rng = stream(spec.seed, STREAM_LENGTHS, 0);
    let mut gap_rng = stream(spec.seed, STREAM_ARRIVALS, 0);
    let closed_loop = matches!(spec.arrival, Arrival::Sequential | Arrival::Concurrency);
    let finite = spec.rate.is_finite();
    let gaps: Box<dyn Fn(&mut StdRng) -> f64> = match spec.arrival {
        Arrival::Poisson if finite => {
            let exp = Exp::new(spec.rate).expect("rate checked above 0");
            Box::new(move |rng| exp.sample(rng))
        }
        Arrival::Gamma if finite => {
            let scale = 1.0 / (spec.rate * spec.burstiness);
            let gamma = Gamma::new(spec.burstiness, scale).expect("shape and scale checked");
            Box::new(move |rng| gamma.sample(rng))
        }
        Arrival::Constant if finite => {
            let gap = 1.0 / spec.rate;
            Box::new(move |_| gap)
        }
        // All at once, or released by the closed loop (the times are then unused).
        _ => Box::new(|_| 0.0),
    };
    // As vLLM: request 0 goes out at once, each later one after one more gap.
    let mut clock_s = 0.0;
    let mut requests = Vec::with_capacity(spec.num_requests);
    for id in 0..spec.num_requests as u64 {
        if id > 0 {
            clock_s += gaps(&mut gap_rng);
        }
        // The mean span was checked; a draw far in the tail (gamma with a small shape) is not.
        if clock_s > limits::MAX_SCHEDULE_S {
            return Err(Error::Invalid(format!(
                "rate {}: request {id} would arrive at {} s, above the limit of {} s",
                limits::show(spec.rate),
                limits::show(clock_s.round()),
                limits::MAX_SCHEDULE_S
            )));
        }
        requests.push(PlannedRequest {
            id,
            arrival_s: (!closed_loop).then_some(clock_s),
            prompt_len: length_rng.random_range(spec.input_len.min..=spec.input_len.max),
            output_len: length_rng.random_range(spec.output_len.min..=spec.output_len.max),
        });
    }
    Ok(requests)
}

const STREAM_ARRIVALS: u64 = 1;
const STREAM_LENGTHS: u64 = 2;
pub(crate) const STREAM_PROMPTS: u64 = 3;

/// An independent RNG per (seed, purpose, index), mixed with SplitMix64 so nearby seeds and
/// indices give unrelated streams.
pub(crate) fn stream(seed: u64, purpose: u64, index: u64) -> StdRng {
    let mut x = seed;
    for word in [purpose, index] {
        x = x.wrapping_add(word).wrapping_add(0x9E37_79B9_7F4A_7C15);
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^= x >> 31;
    }
    StdRng::seed_from_u64(x)
}

/// JSON has no infinity: an infinite rate is written as `null` and read back as infinity.
mod infinity_as_null {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
        match value.is_finite() {
            true => serializer.serialize_f64(*value),
            false => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(deserializer)?.unwrap_or(f64::INFINITY))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(arrival: Arrival, rate: f64, num_requests: usize) -> WorkloadSpec {
        WorkloadSpec {
            arrival,
            rate,
            burstiness: 1.0,
            concurrency: 4,
            num_requests,
            input_len: LenRange { min: 8, max: 64 },
            output_len: LenRange { min: 1, max: 32 },
            seed: 42,
        }
    }

    fn gaps(plan: &[PlannedRequest]) -> Vec<f64> {
        let times: Vec<f64> = plan.iter().map(|r| r.arrival_s.unwrap()).collect();
        times.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// (mean, coefficient of variation)
    fn mean_cv(values: &[f64]) -> (f64, f64) {
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        (mean, var.sqrt() / mean)
    }

    #[test]
    fn same_seed_same_plan_and_lengths_ignore_the_rate() {
        let a = plan(&spec(Arrival::Poisson, 4.0, 1000)).unwrap();
        assert_eq!(a, plan(&spec(Arrival::Poisson, 4.0, 1000)).unwrap());
        let mut other_seed = spec(Arrival::Poisson, 4.0, 1000);
        other_seed.seed = 43;
        assert_ne!(a, plan(&other_seed).unwrap());
        let b = plan(&spec(Arrival::Constant, 9.0, 1000)).unwrap();
        for (x, y) in a.iter().zip(&b) {
            assert_eq!((x.prompt_len, x.output_len), (y.prompt_len, y.output_len));
        }
        assert!(a.iter().all(|r| (8..=64).contains(&r.prompt_len)));
        assert!(a.iter().all(|r| (1..=32).contains(&r.output_len)));
        assert!(a.iter().any(|r| r.prompt_len == 8) && a.iter().any(|r| r.prompt_len == 64));
    }

    #[test]
    fn poisson_mean_gap_is_one_over_rate() {
        let p = plan(&spec(Arrival::Poisson, 5.0, 20_001)).unwrap();
        assert_eq!(p[0].arrival_s, Some(0.0));
        let (mean, cv) = mean_cv(&gaps(&p));
        assert!((mean - 0.2).abs() < 0.2 * 0.03, "mean gap {mean}");
        assert!((cv - 1.0).abs() < 0.03, "cv {cv}");
    }

    #[test]
    fn gamma_burstiness_sets_the_spread() {
        let mut s = spec(Arrival::Gamma, 2.0, 20_001);
        let (mean, cv) = mean_cv(&gaps(&plan(&s).unwrap()));
        assert!((mean - 0.5).abs() < 0.5 * 0.03 && (cv - 1.0).abs() < 0.05, "{mean} {cv}");
        s.burstiness = 100.0; // cv = 1/sqrt(shape) = 0.1
        let (mean, cv) = mean_cv(&gaps(&plan(&s).unwrap()));
        assert!((mean - 0.5).abs() < 0.5 * 0.03 && (cv - 0.1).abs() < 0.01, "{mean} {cv}");
    }

    #[test]
    fn constant_infinite_and_closed_loop_arrivals() {
        let c = plan(&spec(Arrival::Constant, 4.0, 3)).unwrap();
        let times: Vec<_> = c.iter().map(|r| r.arrival_s).collect();
        assert_eq!(times, vec![Some(0.0), Some(0.25), Some(0.5)]);
        let burst = plan(&spec(Arrival::Poisson, f64::INFINITY, 5)).unwrap();
        assert!(burst.iter().all(|r| r.arrival_s == Some(0.0)));
        for arrival in [Arrival::Sequential, Arrival::Concurrency] {
            assert!(plan(&spec(arrival, 1.0, 5)).unwrap().iter().all(|r| r.arrival_s.is_none()));
        }
    }

    #[test]
    fn parsing_and_validation() {
        assert_eq!("128".parse::<LenRange>().unwrap(), LenRange { min: 128, max: 128 });
        assert_eq!("64:512".parse::<LenRange>().unwrap(), LenRange { min: 64, max: 512 });
        for bad in ["", "0", "512:64", "a:5", "5:", "-3", "1:2:3"] {
            let err = bad.parse::<LenRange>().unwrap_err().to_string();
            assert!(err.contains("length range"), "{bad:?} -> {err}");
        }
        assert_eq!("gamma".parse::<Arrival>().unwrap(), Arrival::Gamma);
        assert!("Poisson ".parse::<Arrival>().is_err());
        type Edit = fn(&mut WorkloadSpec);
        let cases: [(&str, Edit); 10] = [
            ("rate", |s| s.rate = 0.0),
            ("rate", |s| s.rate = f64::NAN),
            ("burstiness", |s| s.burstiness = 0.0),
            ("concurrency", |s| (s.arrival, s.concurrency) = (Arrival::Concurrency, 0)),
            ("number of requests", |s| s.num_requests = 0),
            ("rate", |s| s.rate = 1e-300),
            ("rate", |s| (s.rate, s.num_requests) = (1e-3, 1000)),
            ("burstiness", |s| s.burstiness = 1e-300),
            ("number of requests", |s| s.num_requests = limits::MAX_REQUESTS + 1),
            ("length range", |s| s.input_len.max = usize::MAX),
        ];
        for (field, edit) in cases {
            let mut broken = spec(Arrival::Gamma, 1.0, 1);
            edit(&mut broken);
            let err = plan(&broken).unwrap_err().to_string();
            assert!(err.contains(field), "{field}: {err}");
        }
    }

    #[test]
    fn infinite_rate_round_trips_through_json() {
        let s = spec(Arrival::Poisson, f64::INFINITY, 3);
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains("\"rate\":null") && json.contains("\"arrival\":\"poisson\""));
        assert_eq!(serde_json::from_str::<WorkloadSpec>(&json).unwrap(), s);
    }
}
