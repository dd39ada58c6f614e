//! What this crate reads back from etcd, as `tally-fuzz` calls it: the stored
//! configuration and settings, a member under its key, the leader's id.

use tally_log_core::{Configuration, NodeId};

use crate::plane::Keys;
use crate::{Member, Result, Settings};

/// The key of member `id` in cluster `cluster`.
pub fn member_key(cluster: &str, id: NodeId) -> Vec<u8> {
    Keys::new(cluster).member(id).into_bytes()
}

pub fn encode_config(config: &Configuration) -> Result<Vec<u8>> {
    crate::plane::encode_config(config)
}

pub fn decode_config(bytes: &[u8]) -> Result<Configuration> {
    crate::plane::decode_config(bytes)
}

pub fn encode_settings(settings: &Settings) -> Vec<u8> {
    serde_json::to_vec(settings).expect("settings encode")
}

pub fn decode_settings(bytes: &[u8]) -> Result<Settings> {
    crate::plane::decode_settings(bytes)
}

pub fn encode_member(member: &Member) -> Vec<u8> {
    serde_json::to_vec(member).expect("members encode")
}

/// A member read back from `key` in cluster `cluster`.
pub fn decode_member(cluster: &str, key: &[u8], value: &[u8]) -> Result<Member> {
    crate::members::decode_member(&Keys::new(cluster), key, value)
}

/// The leader key's value, as a campaign writes it.
pub fn encode_leader(id: NodeId) -> Vec<u8> {
    id.0.to_string().into_bytes()
}

pub fn decode_leader(value: &[u8]) -> Result<NodeId> {
    crate::election::decode_leader(value)
}
