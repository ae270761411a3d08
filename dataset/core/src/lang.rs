use serde::{Deserialize, Serialize};

/// The five languages every statement, note, UI string and guide exists in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    Pt,
    Es,
    Zh,
    It,
    En,
}

impl Lang {
    /// Display order of the language switcher.
    pub const ALL: [Lang; 5] = [Lang::En, Lang::Pt, Lang::Es, Lang::Zh, Lang::It];

    /// The URL prefix and data key: `pt`, `es`, `zh`, `it`, `en`.
    pub fn code(self) -> &'static str {
        match self {
            Lang::Pt => "pt",
            Lang::Es => "es",
            Lang::Zh => "zh",
            Lang::It => "it",
            Lang::En => "en",
        }
    }

    /// The BCP 47 tag for `<html lang>`.
    pub fn bcp47(self) -> &'static str {
        match self {
            Lang::Pt => "pt-BR",
            Lang::Es => "es-419",
            Lang::Zh => "zh-Hans",
            Lang::It => "it",
            Lang::En => "en",
        }
    }

    /// The language's own name, as shown in the switcher.
    pub fn native_name(self) -> &'static str {
        match self {
            Lang::Pt => "Português",
            Lang::Es => "Español",
            Lang::Zh => "中文",
            Lang::It => "Italiano",
            Lang::En => "English",
        }
    }

    pub fn from_code(code: &str) -> Option<Lang> {
        Lang::ALL.into_iter().find(|l| l.code() == code)
    }

    /// Picks a language from a browser preference list (`navigator.languages`), e.g.
    /// `["pt-BR", "en-US"]`: the first entry whose primary subtag we have; English otherwise.
    pub fn negotiate<'a>(preferences: impl IntoIterator<Item = &'a str>) -> Lang {
        preferences
            .into_iter()
            .find_map(|tag| {
                let primary = tag.split(['-', '_']).next()?.to_ascii_lowercase();
                Lang::from_code(&primary)
            })
            .unwrap_or(Lang::En)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_takes_the_first_supported_primary_subtag() {
        assert_eq!(Lang::negotiate(["pt-BR", "en-US"]), Lang::Pt);
        assert_eq!(Lang::negotiate(["de-DE", "zh-CN", "en"]), Lang::Zh);
        assert_eq!(Lang::negotiate(["es_MX"]), Lang::Es);
        assert_eq!(Lang::negotiate(["fr", "de"]), Lang::En);
        assert_eq!(Lang::negotiate([]), Lang::En);
        assert_eq!(Lang::negotiate(["IT"]), Lang::It);
    }

    #[test]
    fn codes_round_trip() {
        for l in Lang::ALL {
            assert_eq!(Lang::from_code(l.code()), Some(l));
        }
        assert_eq!(Lang::from_code("de"), None);
    }
}
