//! One trace under several configurations on several cards: the matrix `probe replay --sweep`
//! prints (and the allocator lab will draw). Pure: the caller passes the cards (their memory
//! and what other processes hold) and gets one [`Outcome`] per (configuration, card).

use crate::config::{self, AllocConf};
use crate::trace::Trace;
use crate::{Options, Outcome, replay};

/// The configurations a sweep tries when none are given, cheapest change first: the default,
/// then settings that cost nothing at run time, then ones that trade speed for memory.
pub const SWEEP_CONFIGS: &[&str] = &[
    "",
    "expandable_segments:True",
    "max_split_size_mb:512",
    "max_split_size_mb:256",
    "max_split_size_mb:128",
    "max_split_size_mb:64",
    "roundup_power2_divisions:4",
    "garbage_collection_threshold:0.6,max_split_size_mb:128",
    "expandable_segments:True,max_split_size_mb:128",
    "backend:cudaMallocAsync",
];

/// A card to replay on.
#[derive(Clone, Debug, PartialEq)]
pub struct Card {
    /// How it is shown (a catalog name, or the size typed).
    pub label: String,
    /// Device memory in bytes (`cudaMemGetInfo` total).
    pub total: u64,
    /// Bytes other processes (and this process's CUDA context) hold when the replay starts.
    pub taken: u64,
}

/// A configuration to try: its name and the parsed settings.
#[derive(Clone, Debug)]
pub struct Config {
    pub name: String,
    pub conf: AllocConf,
}

impl Config {
    /// The built-in list, parsed.
    pub fn defaults() -> Vec<Config> {
        SWEEP_CONFIGS
            .iter()
            .map(|s| Config {
                name: if s.is_empty() { "default".to_string() } else { s.to_string() },
                conf: config::parse(s).expect("built-in configs parse"),
            })
            .collect()
    }
}

/// `outcomes[config][card]`, plus, per card, the first configuration (in the given order) that
/// does not run out of memory.
#[derive(Clone, Debug)]
pub struct Matrix {
    pub outcomes: Vec<Vec<Outcome>>,
    pub first_that_fits: Vec<Option<usize>>,
}

/// Replays `trace` for every (configuration, card). `progress(done, total)` is called after each
/// cell; when it returns false the sweep stops and returns `None` (cancelled).
pub fn sweep(trace: &Trace, configs: &[Config], cards: &[Card], mut progress: impl FnMut(usize, usize) -> bool) -> Option<Matrix> {
    let total = configs.len() * cards.len();
    let mut outcomes = Vec::with_capacity(configs.len());
    let mut done = 0;
    for c in configs {
        let mut row = Vec::with_capacity(cards.len());
        for card in cards {
            let mut o = Options::new(c.conf.clone(), card.total);
            o.device_free = Some(card.total.saturating_sub(card.taken));
            row.push(replay(trace, &o));
            done += 1;
            if !progress(done, total) {
                return None;
            }
        }
        outcomes.push(row);
    }
    let first_that_fits = (0..cards.len()).map(|k| outcomes.iter().position(|row: &Vec<Outcome>| !row[k].oom)).collect();
    Some(Matrix { outcomes, first_that_fits })
}

/// Parses a size as people type it: `12GiB`, `12 GiB`, `8GB`, `1.5GiB`, `512MiB` or bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: f64 = match unit.trim() {
        "" | "B" => 1.0,
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "KiB" => 1024.0,
        "MiB" => 1048576.0,
        "GiB" => 1073741824.0,
        other => return Err(format!("`{s}`: unknown unit `{other}` (use B, KB, MB, GB, KiB, MiB or GiB)")),
    };
    let v: f64 = num.parse().map_err(|_| format!("`{s}`: not a size (e.g. 12GiB)"))?;
    let bytes = (v * mult).round();
    if !(1.0..1e19).contains(&bytes) {
        return Err(format!("`{s}`: a size must be above 0 and below 10 EB"));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("12GiB"), Ok(12 << 30));
        assert_eq!(parse_size("1.5 GiB"), Ok(3 << 29));
        assert_eq!(parse_size("8GB"), Ok(8_000_000_000));
        assert_eq!(parse_size("1024"), Ok(1024));
        assert!(parse_size("12 GiBs").is_err());
        assert!(parse_size("0GiB").is_err());
        assert!(parse_size("GiB").is_err());
    }

    #[test]
    fn the_first_config_that_fits_is_found_per_card_and_a_sweep_can_be_cancelled() {
        // 3 GiB live at once, then freed and a 3.5 GiB block: default keeps 3 GiB cached in
        // segments it cannot reuse for the larger request.
        let json = br#"{"events": [["a", 1, 1073741824], ["a", 2, 1073741824], ["a", 3, 1073741824], ["f", 1, 0], ["f", 2, 0], ["f", 3, 0], ["a", 4, 3758096384], ["f", 4, 0]]}"#;
        let t = crate::trace::parse(json).unwrap();
        let cards = vec![
            Card { label: "4 GiB".into(), total: 4 << 30, taken: 0 },
            Card { label: "2 GiB".into(), total: 2 << 30, taken: 0 },
            Card { label: "8 GiB".into(), total: 8 << 30, taken: 0 },
        ];
        let configs = Config::defaults();
        let mut calls = 0;
        let m = sweep(&t, &configs, &cards, |d, n| {
            calls += 1;
            assert!(d <= n);
            true
        })
        .unwrap();
        assert_eq!(calls, configs.len() * cards.len());
        assert_eq!(m.outcomes.len(), configs.len());
        // 2 GiB: nothing fits; 8 GiB: the default does.
        assert_eq!(m.first_that_fits[1], None);
        assert_eq!(m.first_that_fits[2], Some(0));
        // 4 GiB: the 3.5 GiB block needs the cache released first, which every config does
        // before giving up, so the default already fits.
        assert_eq!(m.first_that_fits[0], Some(0));
        let mut n = 0;
        assert!(sweep(&t, &configs, &cards, |_, _| {
            n += 1;
            n < 4
        })
        .is_none());
        assert_eq!(n, 4);
    }
}
