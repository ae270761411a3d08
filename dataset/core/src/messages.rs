//! What the fit engine, the card parser and the config reader say when they cannot answer. Each
//! message has an id and an English template with `{name}` placeholders: `say` writes one, and
//! `read` finds which message a text is and with which values, so that the site can say it in the
//! reader's language (the `[error]` strings of i18n, by id) while the engine's errors stay plain
//! text for the CLI and the API.

/// Every message: (id, English template).
pub const MESSAGES: &[(&str, &str)] = &[
    ("at-least-one", "field `{field}`: must be at least 1"),
    // Another message about the workload's model object (its `error` is that message).
    ("in-model", "field `model`: {error}"),
    ("kv-quantized-needs-fa", "field `kv_cache`: llama.cpp keeps a quantized KV cache only with flash attention on (`flash_attention`)"),
    ("block-swap-too-many", "field `block_swap`: {value} blocks; `{model}` has {blocks} swappable blocks in the catalog"),
    ("card-unknown", "`{spec}` is neither a catalog GPU id nor a size such as 8GiB"),
    ("card-other-negative", "memory used by other processes must be 0 or more GiB"),
    ("card-other-whole", "other processes already use the whole card"),
    ("card-ram-invalid", "system RAM must be a size above 0 GiB"),
    ("gpus-cards", "the workload is spread over {gpus} GPUs (`gpus`) but {cards} cards were given: give one card (that many of it) or one per GPU"),
    ("gpus-too-many", "field `gpus`: {gpus} GPUs is more than the {max} the engine takes"),
    ("gpus-diffusion", "diffusion on several GPUs is not modelled: give one card"),
    ("tensor-split-count", "field `tensor_split`: {shares} shares for {gpus} GPUs; give one share per GPU"),
    ("tensor-split-negative", "field `tensor_split`: shares must be numbers of 0 or more"),
    ("split-row", "field `split_mode`: llama.cpp's CUDA backend no longer has the row split (deprecated; use `layer`, the default)"),
    ("split-tensor", "field `split_mode`: the experimental tensor split is not modelled yet; use `layer`, the default"),
    ("vllm-pp", "field `pipeline_parallel`: {pp} stages must divide the {gpus} GPUs and be at most the model's {layers} layers"),
    ("vllm-tp-heads", "field `gpus`: vLLM splits the {heads} attention heads evenly, so the tensor-parallel size ({tp}) must divide them"),
    ("fsdp-and-zero", "fields `fsdp` and `zero`: FSDP and DeepSpeed ZeRO are two ways to shard; give one"),
    ("fsdp-shard-gpus", "field `shard_gpus`: groups of {shard} GPUs must divide the {gpus} GPUs"),
    ("offload-params-needs-sharding", "field `cpu_offload`: parameter offload needs the parameters sharded (`fsdp`, or `zero` 3)"),
    (
        "offload-optimizer-needs-zero",
        "field `cpu_offload`: optimizer offload is DeepSpeed's (`zero` 1, 2 or 3); FSDP offloads the parameters with it (`params`)",
    ),
    ("config-not-object", "config.json must be a JSON object"),
    ("config-no-model-type", "config.json has no `model_type`; describe the model by hand with these fields instead: {fields}"),
    (
        "config-unknown-model-type",
        "model_type `{model_type}` is not one the engine reads (it reads {known}); describe the model by hand with these fields: {fields}",
    ),
    ("config-lacks", "config.json (model_type `{model_type}`) lacks `{key}`, which the engine needs"),
    ("config-not-whole", "config.json field `{key}` must be a whole number ≥ 0, found {value}"),
    ("config-too-large", "config.json field `{key}` is {value}, more than any model has (at most {max})"),
    ("config-not-bool", "config.json field `{key}` must be true or false, found {value}"),
    ("config-out-of-range", "config.json field `{key}` must be between 1 and {max}, found {value}"),
    ("config-at-least-one", "config.json field `{key}` must be at least 1"),
    ("config-layer-types-count", "config.json field `layer_types` has {count} entries for {layers} layers"),
    ("config-layer-types-type", "config.json field `layer_types` must be an array of strings"),
    ("config-no-text-config", "gemma3 config.json has no `text_config` object"),
    ("config-too-many-params", "config.json describes {count} parameters, more than any model"),
    ("not-json", "{what} is not JSON (line {line}, column {column})"),
    ("manual-not-whole", "`{field}` must be a whole number above 0"),
    ("file-json-too-large", "a JSON file this large is neither a config nor an index"),
    ("file-header-too-long", "the header does not fit in the file"),
    ("hub-status", "the Hub answered HTTP {status}"),
];

enum Piece<'a> {
    Text(&'a str),
    Value(&'a str),
}

fn pieces(template: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let close = open + rest[open..].find('}').expect("a closed placeholder");
        if open > 0 {
            out.push(Piece::Text(&rest[..open]));
        }
        out.push(Piece::Value(&rest[open + 1..close]));
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    out
}

/// The message `id` with its values (a programming error if the id is unknown).
pub fn say(id: &str, values: &[(&str, &str)]) -> String {
    let (_, template) = MESSAGES.iter().find(|(i, _)| *i == id).unwrap_or_else(|| panic!("no message `{id}`"));
    pieces(template)
        .into_iter()
        .map(|p| match p {
            Piece::Text(t) => t,
            Piece::Value(name) => values.iter().find(|(n, _)| *n == name).map(|(_, v)| *v).unwrap_or_else(|| panic!("message `{id}` needs `{name}`")),
        })
        .collect()
}

/// The ids of the messages in `text`: its own, then those of its `error` value, if any.
pub fn ids(text: &str) -> Vec<&'static str> {
    let mut out = Vec::new();
    let mut rest = text.to_string();
    while let Some((id, values)) = read(&rest) {
        out.push(id);
        match values.into_iter().find(|(n, _)| *n == "error") {
            Some((_, inner)) => rest = inner,
            None => break,
        }
    }
    out
}

/// Which message `text` is, and its values; `None` for any other text.
pub fn read(text: &str) -> Option<(&'static str, Vec<(&'static str, String)>)> {
    'messages: for (id, template) in MESSAGES {
        let ps = pieces(template);
        let mut rest = text;
        let mut values = Vec::new();
        for (i, p) in ps.iter().enumerate() {
            match p {
                Piece::Text(t) => match rest.strip_prefix(t) {
                    Some(r) => rest = r,
                    None => continue 'messages,
                },
                Piece::Value(name) => {
                    // A value runs to the next fixed text (or to the end).
                    let end = match ps.get(i + 1) {
                        Some(Piece::Text(next)) => match rest.find(next) {
                            Some(e) => e,
                            None => continue 'messages,
                        },
                        _ => rest.len(),
                    };
                    values.push((*name, rest[..end].to_string()));
                    rest = &rest[end..];
                }
            }
        }
        if rest.is_empty() {
            return Some((id, values));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_reads_back_as_itself_with_its_values() {
        for (id, template) in MESSAGES {
            let names: Vec<&str> = pieces(template).into_iter().filter_map(|p| if let Piece::Value(n) = p { Some(n) } else { None }).collect();
            let values: Vec<(&str, String)> = names.iter().enumerate().map(|(i, n)| (*n, format!("v{i} x"))).collect();
            let refs: Vec<(&str, &str)> = values.iter().map(|(n, v)| (*n, v.as_str())).collect();
            let text = say(id, &refs);
            let (got, back) = read(&text).unwrap_or_else(|| panic!("{id}: {text}"));
            assert_eq!(got, *id, "{text}");
            assert_eq!(back, values, "{id}");
        }
        // Ids are unique.
        for (i, (id, _)) in MESSAGES.iter().enumerate() {
            assert!(MESSAGES[..i].iter().all(|(other, _)| other != id), "{id} twice");
        }
    }

    #[test]
    fn a_message_about_the_model_carries_the_config_readers_message() {
        let inner = say("config-lacks", &[("model_type", "llama"), ("key", "vocab_size")]);
        let outer = say("in-model", &[("error", &inner)]);
        assert_eq!(ids(&outer), ["in-model", "config-lacks"]);
        assert_eq!(ids("plain text"), Vec::<&str>::new());
    }

    #[test]
    fn other_text_is_no_message() {
        assert_eq!(read("field `batch`: must be at least 1 or so"), None);
        assert_eq!(read("something else"), None);
        assert_eq!(read(&say("at-least-one", &[("field", "batch")])), Some(("at-least-one", vec![("field", "batch".to_string())])));
    }
}
