//! The calculator form's rules: which fields a workload being edited offers, decided on the form's
//! state (a JSON object that may not be a valid workload yet). The site renders what these say;
//! they are tested here, natively.

use serde_json::{Map, Value};

/// Whether the workload can be spread over several GPUs in one machine, so the form offers
/// another card: training (data parallel) and the engines that split a model (vLLM, llama.cpp,
/// Ollama); not transformers' single-process inference, not diffusion.
pub fn offers_more_cards(state: &Map<String, Value>) -> bool {
    match state.get("kind").and_then(Value::as_str) {
        Some("training") => true,
        Some("diffusion") => false,
        _ => state.get("engine").and_then(Value::as_str).is_some_and(|e| e != "transformers"),
    }
}

/// Whether a training workload's form offers CPU offload: once its states are sharded (a ZeRO
/// stage, or FSDP), or when the state already names an offload (so it can be taken back).
pub fn offers_cpu_offload(state: &Map<String, Value>) -> bool {
    let text = |k: &str| state.get(k).and_then(Value::as_str).unwrap_or("");
    let zero = state.get("zero").and_then(|v| v.as_u64().or_else(|| v.as_str().and_then(|x| x.parse().ok()))).unwrap_or(0);
    zero > 0 || !text("fsdp").is_empty() || !text("cpu_offload").is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn state(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn more_cards_where_the_workload_can_use_them() {
        assert!(offers_more_cards(&state(json!({"kind": "training"}))));
        assert!(!offers_more_cards(&state(json!({"kind": "diffusion", "engine": "vllm"}))));
        for (engine, offered) in [("vllm", true), ("llama.cpp", true), ("ollama", true), ("transformers", false)] {
            assert_eq!(offers_more_cards(&state(json!({"kind": "llm-inference", "engine": engine}))), offered, "{engine}");
        }
        // Not chosen yet: the default engine (transformers) runs on one GPU.
        assert!(!offers_more_cards(&state(json!({"kind": "llm-inference"}))));
    }

    #[test]
    fn cpu_offload_once_states_are_sharded() {
        assert!(!offers_cpu_offload(&state(json!({"kind": "training"}))));
        assert!(!offers_cpu_offload(&state(json!({"zero": 0}))));
        assert!(offers_cpu_offload(&state(json!({"zero": 2}))));
        assert!(offers_cpu_offload(&state(json!({"zero": "3"}))));
        assert!(offers_cpu_offload(&state(json!({"fsdp": "full"}))));
        assert!(!offers_cpu_offload(&state(json!({"fsdp": ""}))));
        // Chosen before the stage went back to 0: still shown, so it can be cleared.
        assert!(offers_cpu_offload(&state(json!({"zero": 0, "cpu_offload": "optimizer"}))));
    }
}
