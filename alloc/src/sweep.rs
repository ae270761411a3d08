//! One trace under several configurations on several cards: the matrix `probe replay --sweep`
//! prints and the allocator lab draws. Pure: the caller passes the cards (their memory
//! and what other processes hold) and gets one [`Outcome`] per (configuration, card).

use crate::config::{self, AllocConf};
use crate::trace::Trace;
use crate::{Options, Outcome, replay};

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
    /// Parses `(name, PYTORCH_CUDA_ALLOC_CONF)` pairs (the lab's and `probe replay --sweep`'s
    /// list is `dataset/data/catalog/alloc-recipes.toml`); the first refused setting is the error,
    /// with PyTorch's own message.
    pub fn parse_all<'a>(list: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Vec<Config>, String> {
        list.into_iter()
            .map(|(name, conf)| {
                config::parse(conf)
                    .map(|c| Config { name: name.to_string(), conf: c })
                    .map_err(|e| format!("PYTORCH_CUDA_ALLOC_CONF={conf:?} is refused by PyTorch 2.11: {e}"))
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
        let configs = Config::parse_all([
            ("default", ""),
            ("expandable", "expandable_segments:True"),
            ("split-128", "max_split_size_mb:128"),
            ("async", "backend:cudaMallocAsync"),
        ])
        .unwrap();
        assert!(Config::parse_all([("x", "max_split_size_mb:10")]).unwrap_err().contains("must be >= 20"));
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
        assert!(
            sweep(&t, &configs, &cards, |_, _| {
                n += 1;
                n < 4
            })
            .is_none()
        );
        assert_eq!(n, 4);
    }
}
