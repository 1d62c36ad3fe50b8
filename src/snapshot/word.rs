//! [`Word`]: a snapshot field whose value comes from a closed set of words (a dialect, a lane
//! state, a quota window, …), typed as the enum that owns the set but tolerant of words this
//! build does not know.
//!
//! The snapshot travels between builds: an attached console (`sluice console`) of an older or
//! newer sluice parses what this one serialises. A plain enum field would make one unknown
//! word fail the whole snapshot; [`Word::Other`] keeps such a word verbatim instead, so it is
//! shown as sent and serialises back byte for byte.

use std::fmt;

use serde::de::{DeserializeOwned, IntoDeserializer};
use serde::{Deserialize, Serialize};

/// An enum whose variants each have one fixed wire word (the same string serde writes).
pub trait Vocabulary: Copy {
    /// The variant's wire word, e.g. `api_key`.
    fn word(self) -> &'static str;
}

/// A closed-set word of the snapshot: [`Word::Known`] when this build knows it, otherwise
/// [`Word::Other`] with the word as received. Serialised as the bare word (JSON string), so
/// the wire form is exactly what a `String` field carried.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Word<T> {
    /// A word this build knows.
    Known(T),
    /// A word this build does not know (from a newer or older sluice), kept as sent; also
    /// the empty word a hand-built view defaults to.
    Other(String),
}

impl<T> Default for Word<T> {
    /// The empty word (what the `String` field defaulted to).
    fn default() -> Self {
        Self::Other(String::new())
    }
}

impl<T> From<T> for Word<T> {
    fn from(t: T) -> Self {
        Self::Known(t)
    }
}

impl<T: Copy> Word<T> {
    /// The known value, `None` for an unknown (or empty) word.
    pub fn known(&self) -> Option<T> {
        match self {
            Self::Known(t) => Some(*t),
            Self::Other(_) => None,
        }
    }
}

impl<T: DeserializeOwned> Word<T> {
    /// The word `s` read as `T` when it is one of `T`'s words, else kept as [`Word::Other`].
    pub fn parse(s: &str) -> Self {
        let de: serde::de::value::StrDeserializer<'_, serde::de::value::Error> =
            s.into_deserializer();
        T::deserialize(de).map_or_else(|_| Self::Other(s.to_owned()), Self::Known)
    }

    /// [`Word::parse`], with `None` for the empty word (a field that is empty when unset).
    pub fn parse_non_empty(s: &str) -> Option<Self> {
        (!s.is_empty()).then(|| Self::parse(s))
    }
}

impl<T: Vocabulary> Word<T> {
    /// The word as serialised.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Known(t) => t.word(),
            Self::Other(s) => s,
        }
    }
}

impl<T: PartialEq> PartialEq<T> for Word<T> {
    fn eq(&self, other: &T) -> bool {
        matches!(self, Self::Known(t) if t == other)
    }
}

impl<T: Vocabulary> PartialEq<&str> for Word<T> {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl<T: Vocabulary> fmt::Display for Word<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// The word of an optional field as the wire carries it: `""` for `None`.
pub fn or_empty<T: Vocabulary>(w: &Option<Word<T>>) -> &str {
    w.as_ref().map_or("", Word::as_str)
}

/// `#[serde(with = "word::empty_is_none")]` for an `Option<Word<T>>` field that the wire
/// carries as a string which is empty when there is no value: `None` ⇄ `""`, so the JSON is
/// the same as the `String` field's was.
pub mod empty_is_none {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::{Vocabulary, Word};

    /// Writes `None` as `""`, a word as itself.
    pub fn serialize<T, S>(v: &Option<Word<T>>, s: S) -> Result<S::Ok, S::Error>
    where
        T: Vocabulary + Serialize,
        S: Serializer,
    {
        match v {
            Some(w) => w.serialize(s),
            None => s.serialize_str(""),
        }
    }

    /// Reads `""` as `None`, any other string as a word (known or not).
    pub fn deserialize<'de, T, D>(d: D) -> Result<Option<Word<T>>, D::Error>
    where
        T: Deserialize<'de>,
        D: Deserializer<'de>,
    {
        Ok(match Word::<T>::deserialize(d)? {
            Word::Other(s) if s.is_empty() => None,
            w => Some(w),
        })
    }
}

macro_rules! vocabulary {
    ($($t:ty),* $(,)?) => {
        $(impl Vocabulary for $t {
            fn word(self) -> &'static str {
                self.as_str()
            }
        })*
    };
}

vocabulary!(
    crate::config::Dialect,
    crate::config::Profile,
    crate::config::Strategy,
    crate::policy::OutcomeClass,
    crate::policy::lane::State,
    crate::policy::limit_reset::Outcome,
    crate::policy::headroom::Window,
    crate::policy::headroom::WindowStatus,
    crate::policy::headroom::preflight::Mark,
    crate::policy::fault::FaultWord,
    crate::policy::select::ExclusionReason,
    super::WaitReason,
    super::SkipReason,
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Profile;

    #[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
    struct View {
        profile: Word<Profile>,
        #[serde(with = "empty_is_none")]
        kind: Option<Word<Profile>>,
    }

    #[test]
    fn known_words_read_typed_and_write_back_the_same() {
        let v: View = serde_json::from_str(r#"{"profile":"api_key","kind":"oauth"}"#).unwrap();
        assert_eq!(v.profile, Profile::ApiKey);
        assert_eq!(v.kind, Some(Word::Known(Profile::Oauth)));
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"profile":"api_key","kind":"oauth"}"#
        );
    }

    #[test]
    fn an_unknown_word_is_kept_verbatim_not_an_error() {
        let v: View = serde_json::from_str(r#"{"profile":"cloud","kind":"ApiKey"}"#).unwrap();
        assert_eq!(v.profile, Word::Other("cloud".into()));
        assert_eq!(v.profile.as_str(), "cloud");
        assert_eq!(v.profile.known(), None);
        assert_eq!(v.kind, Some(Word::Other("ApiKey".into())));
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"profile":"cloud","kind":"ApiKey"}"#
        );
    }

    #[test]
    fn the_empty_word_is_none_and_a_default_writes_empty_strings() {
        let v: View = serde_json::from_str(r#"{"profile":"","kind":""}"#).unwrap();
        assert_eq!(v, View::default());
        assert_eq!(
            serde_json::to_string(&View::default()).unwrap(),
            r#"{"profile":"","kind":""}"#
        );
    }

    #[test]
    fn a_non_string_is_an_error_not_a_panic() {
        assert!(serde_json::from_str::<View>(r#"{"profile":7,"kind":""}"#).is_err());
    }

    #[test]
    fn parse_reads_known_words_and_keeps_others() {
        assert_eq!(Word::<Profile>::parse("local"), Profile::Local);
        assert_eq!(Word::<Profile>::parse("x"), Word::Other("x".into()));
        assert_eq!(Word::<Profile>::parse("local").to_string(), "local");
    }
}
