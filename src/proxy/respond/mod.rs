//! The last stage: what dispatch hands back (`outcome`), committing the response head
//! (`commit`), relaying a stream past its hold (`relay`), continuing a stream that broke
//! (`continuation` for the rule, `continuer` for the attempt), and the response body type
//! (`response`).

pub mod commit;
pub mod continuation;
pub mod continuer;
pub mod outcome;
pub mod relay;
pub mod response;
