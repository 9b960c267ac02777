//! Time to ready: where a model load's time goes, from the load's start to the engine's first
//! token, and where its bytes came from. For a browser user the first visit (downloading the
//! weights, or reading them back from the cache on a later one, uploading them, compiling the
//! pipelines) usually costs more than decoding; this is the record of it.
//!
//! The edges fill it from their loaders (the CLI's `bench` and `generate`, the page's worker):
//! what came before `ForwardPass::load` (the download, opening and checking the checkpoint) is
//! theirs, the rest is the engine's [`LoadTimes`]. A run's record keeps it
//! (`run_config.time_to_ready`); results saved before it have none. The phases are durations
//! measured one after the other on one clock, so they add up to the whole but for `other`: what
//! the edge did between them (posting updates, freeing the previous model).

use serde::{Deserialize, Serialize};

use crate::bench::base::lang::Lang;
use crate::engine::forward::LoadTimes;

/// Where a load's weights came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadSource {
    /// A URL: this load downloaded some of the files (the others, if any, were in the cache).
    Network,
    /// A URL whose every file was in the browser's cache already: no download.
    Cache,
    /// A model folder on disk (the CLI's `--model`).
    Disk,
    /// Files picked in the browser.
    Files,
    /// Generated weights (the embedded default, a synthetic shape): nothing to download or read.
    #[default]
    Generated,
}

/// One model load, phase by phase (seconds) and byte by byte.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TimeToReady {
    pub source: LoadSource,
    /// Bytes this load downloaded (0 without a download).
    pub fetched_bytes: u64,
    /// Bytes of the files this load found stored: every file it opened in the browser's cache,
    /// or the safetensors files of a folder on disk or of picked files.
    pub stored_bytes: u64,
    /// Time spent downloading (range checks of the headers included); 0 without a download.
    pub download_s: f64,
    /// Opening the checkpoint, the download left out: config.json, the safetensors headers, every
    /// tensor the config implies checked for its shape, tokenizer.json.
    pub open_s: f64,
    /// Waiting for the weights' rows from their source ([`LoadTimes::read_s`]).
    pub read_s: f64,
    /// The bytes those rows came to.
    pub read_bytes: u64,
    /// The weights onto the GPU and the engine's buffers ([`LoadTimes::upload_s`]).
    pub upload_s: f64,
    /// Creating the compute pipelines.
    pub pipelines_s: f64,
    /// The first step, until its token is read back: where most drivers compile the pipelines.
    pub first_step_s: f64,
    /// The engine timing its kernel variants (`engine::trial`); 0 where it did not run or took
    /// an earlier load's choice.
    pub trial_s: f64,
    /// The kernels came from an earlier load's trial, kept (`Some(false)`: timed now; `None`:
    /// no trial).
    pub trial_cached: Option<bool>,
    /// From the load's start to the first token.
    pub ready_s: f64,
}

/// A part of the bar, in the order a load goes through them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Download,
    Open,
    Read,
    Upload,
    /// The pipelines created and the first step.
    Compile,
    /// The kernel variants timed (`engine::trial`).
    Trial,
    Other,
}

impl Phase {
    pub const ALL: [Phase; 7] =
        [Phase::Download, Phase::Open, Phase::Read, Phase::Upload, Phase::Compile, Phase::Trial, Phase::Other];

    pub fn label(self, lang: Lang) -> &'static str {
        match (self, lang) {
            (Phase::Download, Lang::En) => "download",
            (Phase::Open, Lang::En) => "parse and checks",
            (Phase::Read, Lang::En) => "read",
            (Phase::Upload, Lang::En) => "upload",
            (Phase::Compile, Lang::En) => "pipelines + first step",
            (Phase::Trial, Lang::En) => "kernel trial",
            (Phase::Other, Lang::En) => "other",
            (Phase::Download, Lang::Zh) => "下载",
            (Phase::Open, Lang::Zh) => "解析与检查",
            (Phase::Read, Lang::Zh) => "读取",
            (Phase::Upload, Lang::Zh) => "上传",
            (Phase::Compile, Lang::Zh) => "管线 + 首步",
            (Phase::Trial, Lang::Zh) => "内核试验",
            (Phase::Other, Lang::Zh) => "其他",
        }
    }

    /// Its colour in the bars (the page's and the HTML report's).
    pub fn colour(self) -> &'static str {
        match self {
            Phase::Download => "#6366f1",
            Phase::Open => "#f59e0b",
            Phase::Read => "#14b8a6",
            Phase::Upload => "#3b82f6",
            Phase::Compile => "#ec4899",
            Phase::Trial => "#a855f7",
            Phase::Other => "#94a3b8",
        }
    }

    /// Its name in markup (a class, a test id).
    pub fn key(self) -> &'static str {
        match self {
            Phase::Download => "download",
            Phase::Open => "open",
            Phase::Read => "read",
            Phase::Upload => "upload",
            Phase::Compile => "compile",
            Phase::Trial => "trial",
            Phase::Other => "other",
        }
    }
}

/// A duration as read from a file: negative or not finite counts as 0.
fn sane(s: f64) -> f64 {
    if s.is_finite() {
        s.max(0.0)
    } else {
        0.0
    }
}

impl TimeToReady {
    /// `self` (what came before `ForwardPass::load`: source, bytes, download, open) with the
    /// load's own times; `load_s`, the load as the edge timed it.
    pub fn after_load(self, times: &LoadTimes, load_s: f64) -> TimeToReady {
        TimeToReady {
            read_s: times.read_s,
            read_bytes: times.read_bytes,
            upload_s: times.upload_s,
            pipelines_s: times.pipelines_s,
            first_step_s: times.first_step_s,
            ready_s: self.download_s + self.open_s + load_s,
            ..self
        }
    }

    /// `self` after the engine's kernel trial (`trial`), whose time counts to the first token.
    pub fn after_trial(self, trial: &crate::engine::trial::Trial) -> TimeToReady {
        let trial_s = if trial.cached { 0.0 } else { trial.seconds };
        TimeToReady { trial_s, trial_cached: Some(trial.cached), ready_s: self.ready_s + trial_s, ..self }
    }

    /// Each phase's seconds, in order; `Other` is what the whole has beyond the phases.
    pub fn phases(&self) -> Vec<(Phase, f64)> {
        let parts = [
            (Phase::Download, sane(self.download_s)),
            (Phase::Open, sane(self.open_s)),
            (Phase::Read, sane(self.read_s)),
            (Phase::Upload, sane(self.upload_s)),
            (Phase::Compile, sane(self.pipelines_s) + sane(self.first_step_s)),
            (Phase::Trial, sane(self.trial_s)),
        ];
        let known: f64 = parts.iter().map(|(_, s)| s).sum();
        let mut all = parts.to_vec();
        all.push((Phase::Other, (sane(self.ready_s) - known).max(0.0)));
        all
    }

    /// The whole, at least the sum of its phases (a record whose `ready_s` is short of them
    /// draws them all).
    pub fn total_s(&self) -> f64 {
        self.phases().iter().map(|(_, s)| s).sum()
    }

    /// Each phase's share of [`TimeToReady::total_s`] (all 0 for an empty record).
    pub fn shares(&self) -> Vec<(Phase, f64)> {
        let total = self.total_s();
        self.phases().into_iter().map(|(p, s)| (p, if total > 0.0 { s / total } else { 0.0 })).collect()
    }

    /// The download's rate, bytes a second, where there was one.
    pub fn download_rate(&self) -> Option<f64> {
        (self.fetched_bytes > 0 && sane(self.download_s) > 0.0).then(|| self.fetched_bytes as f64 / self.download_s)
    }

    /// The report's lines: the whole, where the bytes came from, the phases.
    pub fn lines(&self, lang: Lang) -> Vec<String> {
        let total = duration(self.total_s());
        let (stored, fetched) = (size(self.stored_bytes), size(self.fetched_bytes));
        let download = duration(self.download_s);
        let rate = self.download_rate().map_or_else(|| "–".to_string(), |r| format!("{}/s", size(r as u64)));
        let head = match lang {
            Lang::En => format!("Time to ready: {total} from the load's start to the first token"),
            Lang::Zh => format!("就绪时间：从开始加载到首个 token 共 {total}"),
        };
        let also_cached = |en: bool| match (self.stored_bytes, en) {
            (0, _) => String::new(),
            (_, true) => format!(", {stored} more read from the browser's cache"),
            (_, false) => format!("，另有 {stored} 读自浏览器缓存"),
        };
        let source = match (self.source, lang) {
            (LoadSource::Network, Lang::En) => {
                format!("  downloaded {fetched} in {download} ({rate}){}", also_cached(true))
            }
            (LoadSource::Network, Lang::Zh) => {
                format!("  下载 {fetched}，用时 {download}（{rate}）{}", also_cached(false))
            }
            (LoadSource::Cache, Lang::En) => format!("  no download: {stored} read from the browser's cache"),
            (LoadSource::Cache, Lang::Zh) => format!("  无下载：{stored} 读自浏览器缓存"),
            (LoadSource::Disk, Lang::En) => format!("  no download: a folder on disk ({stored})"),
            (LoadSource::Disk, Lang::Zh) => format!("  无下载：磁盘上的模型文件夹（{stored}）"),
            (LoadSource::Files, Lang::En) => format!("  no download: files picked in the browser ({stored})"),
            (LoadSource::Files, Lang::Zh) => format!("  无下载：在浏览器中选取的文件（{stored}）"),
            (LoadSource::Generated, Lang::En) => {
                "  no download: the weights are generated (the embedded default or a synthetic shape)".to_string()
            }
            (LoadSource::Generated, Lang::Zh) => "  无下载：权重是生成的（内置默认模型或合成形状）".to_string(),
        };
        let phases: Vec<String> = self
            .phases()
            .into_iter()
            // Generated weights read nothing (the GPU writes them).
            .filter(|&(p, _)| p != Phase::Download && !(p == Phase::Read && self.read_bytes == 0))
            .filter(|&(p, _)| p != Phase::Trial || self.trial_cached.is_some())
            .map(|(p, s)| match (p, self.trial_cached, lang) {
                (Phase::Read, ..) => format!("{} {} {}", p.label(lang), size(self.read_bytes), duration(s)),
                (Phase::Trial, Some(true), Lang::En) => format!("{}: an earlier load's choice", p.label(lang)),
                (Phase::Trial, Some(true), Lang::Zh) => format!("{}：沿用先前加载的选择", p.label(lang)),
                _ => format!("{} {}", p.label(lang), duration(s)),
            })
            .collect();
        vec![head, source, format!("  {}", phases.join(" · "))]
    }
}

/// What a warm cache saved against a cold load of the same model: seconds and the share of the
/// cold load's time (negative when the cached load was slower).
pub fn saving(cold: &TimeToReady, cached: &TimeToReady) -> (f64, f64) {
    let (c, w) = (cold.total_s(), cached.total_s());
    let saved = c - w;
    (saved, if c > 0.0 { saved / c } else { 0.0 })
}

/// The comparison's line: "cold 2.31 s, from the cache 0.84 s: the cache saves 1.47 s (64%)".
pub fn saving_line(cold: &TimeToReady, cached: &TimeToReady, lang: Lang) -> String {
    let (saved, share) = saving(cold, cached);
    let (c, w) = (duration(cold.total_s()), duration(cached.total_s()));
    let percent = (share * 100.0).round();
    match (lang, saved > 0.0) {
        (Lang::En, true) => format!("cold {c}, from the cache {w}: the cache saves {} ({percent}%)", duration(saved)),
        (Lang::En, false) => format!("cold {c}, from the cache {w}: the cache saved nothing"),
        (Lang::Zh, true) => format!("冷加载 {c}，读缓存 {w}：缓存节省 {}（{percent}%）", duration(saved)),
        (Lang::Zh, false) => format!("冷加载 {c}，读缓存 {w}：缓存没有节省时间"),
    }
}

/// "850 ms", "2.31 s".
pub fn duration(s: f64) -> String {
    let s = sane(s);
    if s < 1.0 {
        format!("{:.0} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

/// "247 kB", "12.6 MB", "1.19 GB" (decimal units, as the download progress says them).
pub fn size(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else {
        format!("{:.0} kB", b / 1e3)
    }
}

#[cfg(test)]
mod tests {
    use crate::bench::base::lang::Lang;
    use crate::bench::record::ready::{duration, saving, saving_line, size, LoadSource, Phase, TimeToReady};
    use crate::engine::forward::LoadTimes;

    fn cold() -> TimeToReady {
        let before = TimeToReady {
            source: LoadSource::Network,
            fetched_bytes: 4_000_000,
            download_s: 2.0,
            open_s: 0.25,
            ..TimeToReady::default()
        };
        let times =
            LoadTimes { read_s: 0.5, read_bytes: 3_000_000, upload_s: 0.75, pipelines_s: 0.1, first_step_s: 0.4 };
        // The load itself took 2.0 s: 0.25 s of it outside the phases.
        before.after_load(&times, 2.0)
    }

    #[test]
    fn the_phases_add_up_to_the_whole_with_the_rest_as_other() {
        let t = cold();
        assert_eq!(t.ready_s, 4.25);
        let phases = t.phases();
        let of = |p: Phase| phases.iter().find(|(q, _)| *q == p).map(|(_, s)| *s).expect("every phase");
        assert_eq!(phases.iter().map(|(p, _)| *p).collect::<Vec<_>>(), Phase::ALL);
        assert_eq!((of(Phase::Download), of(Phase::Open), of(Phase::Read)), (2.0, 0.25, 0.5));
        assert_eq!((of(Phase::Upload), of(Phase::Compile)), (0.75, 0.5));
        assert!((of(Phase::Other) - 0.25).abs() < 1e-12, "{}", of(Phase::Other));
        assert!((t.total_s() - 4.25).abs() < 1e-12);
        let shares: f64 = t.shares().iter().map(|(_, s)| s).sum();
        assert!((shares - 1.0).abs() < 1e-12);
        assert_eq!(t.download_rate(), Some(2_000_000.0));
    }

    #[test]
    fn a_record_from_a_file_with_bad_numbers_draws_nothing_negative() {
        let t =
            TimeToReady { download_s: -1.0, open_s: f64::NAN, upload_s: 1.0, ready_s: 0.5, ..TimeToReady::default() };
        assert!(t.phases().iter().all(|(_, s)| *s >= 0.0 && s.is_finite()), "{:?}", t.phases());
        assert_eq!(t.total_s(), 1.0, "a whole short of its phases is their sum");
        assert_eq!(t.download_rate(), None);
        let empty = TimeToReady::default();
        assert!(empty.shares().iter().all(|(_, s)| *s == 0.0));
        // Results saved before it have none; a partial record reads with the rest at 0.
        let read: TimeToReady = serde_json::from_str(r#"{"source":"cache","stored_bytes":12}"#).expect("reads");
        assert_eq!((read.source, read.stored_bytes, read.ready_s), (LoadSource::Cache, 12, 0.0));
    }

    #[test]
    fn the_lines_say_where_the_bytes_came_from_in_both_languages() {
        let en = cold().lines(Lang::En);
        assert_eq!(en[0], "Time to ready: 4.25 s from the load's start to the first token");
        assert_eq!(en[1], "  downloaded 4.0 MB in 2.00 s (2.0 MB/s)");
        assert_eq!(
            en[2],
            "  parse and checks 250 ms · read 3.0 MB 500 ms · upload 750 ms · pipelines + first step 500 ms · other 250 ms"
        );
        let zh = cold().lines(Lang::Zh);
        assert_eq!(zh[0], "就绪时间：从开始加载到首个 token 共 4.25 s");
        assert_eq!(zh[1], "  下载 4.0 MB，用时 2.00 s（2.0 MB/s）");
        assert!(zh[2].starts_with("  解析与检查 250 ms · 读取 3.0 MB 500 ms · 上传 750 ms"), "{}", zh[2]);
        let cached = TimeToReady { source: LoadSource::Cache, stored_bytes: 247_032, ..TimeToReady::default() };
        assert_eq!(cached.lines(Lang::En)[1], "  no download: 247 kB read from the browser's cache");
        assert_eq!(cached.lines(Lang::Zh)[1], "  无下载：247 kB 读自浏览器缓存");
        let embedded = TimeToReady { upload_s: 0.5, ..TimeToReady::default() };
        assert!(embedded.lines(Lang::En)[1].contains("no download: the weights are generated"));
        assert_eq!(
            embedded.lines(Lang::En)[2],
            "  parse and checks 0 ms · upload 500 ms · pipelines + first step 0 ms · other 0 ms"
        );
        assert!(embedded.lines(Lang::Zh)[1].contains("无下载"));
        let disk = TimeToReady { source: LoadSource::Disk, stored_bytes: 1_190_000_000, ..TimeToReady::default() };
        assert_eq!(disk.lines(Lang::En)[1], "  no download: a folder on disk (1.19 GB)");
    }

    #[test]
    fn the_cache_saving_is_the_cold_load_less_the_cached_one() {
        let cached = TimeToReady { source: LoadSource::Cache, open_s: 0.25, ready_s: 1.7, ..TimeToReady::default() };
        let (saved, share) = saving(&cold(), &cached);
        assert!((saved - 2.55).abs() < 1e-12 && (share - 0.6).abs() < 1e-12, "{saved} {share}");
        assert_eq!(
            saving_line(&cold(), &cached, Lang::En),
            "cold 4.25 s, from the cache 1.70 s: the cache saves 2.55 s (60%)"
        );
        assert_eq!(saving_line(&cold(), &cached, Lang::Zh), "冷加载 4.25 s，读缓存 1.70 s：缓存节省 2.55 s（60%）");
        assert!(saving_line(&cached, &cold(), Lang::En).ends_with("the cache saved nothing"));
    }

    #[test]
    fn durations_and_sizes_read_as_a_person_says_them() {
        assert_eq!(
            (duration(0.0004), duration(0.85), duration(2.314), duration(f64::NAN)),
            ("0 ms".into(), "850 ms".into(), "2.31 s".into(), "0 ms".into())
        );
        assert_eq!(
            (size(999), size(247_032), size(12_600_000), size(1_190_000_000)),
            ("1 kB".into(), "247 kB".into(), "12.6 MB".into(), "1.19 GB".into())
        );
    }
}
