//! JSON Schemas generated from Rust types ([`schemars`]), tidied for the
//! clients that read them: the schemas of tools' arguments and results and
//! of prompts' arguments.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::Value;

/// The JSON Schema (2020-12, subschemas inlined) of `T`, as a tool's
/// `inputSchema` and `outputSchema` and a prompt's arguments are written:
/// no `title`, `properties` on every object schema, `{}` for any value.
///
/// ```
/// use mcp_tasks_edge::tools::schema_of;
///
/// #[derive(schemars::JsonSchema)]
/// struct Args {
///     /// The city to report on.
///     city: String,
///     days: Option<u8>,
/// }
///
/// let schema = schema_of::<Args>();
/// assert_eq!(schema["type"], "object");
/// assert_eq!(schema["properties"]["city"]["type"], "string");
/// assert_eq!(schema["required"], serde_json::json!(["city"]));
/// ```
pub fn schema_of<T: JsonSchema>() -> Value {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.meta_schema = None;
        s.inline_subschemas = true;
    });
    let mut v = SchemaGenerator::new(settings)
        .into_root_schema_for::<T>()
        .to_value();
    objects_for_any(&mut v);
    if let Value::Object(map) = &mut v {
        map.remove("title");
        // Clients expect `properties` on an object schema, even an empty one.
        if map.get("type").and_then(Value::as_str) == Some("object") {
            map.entry("properties")
                .or_insert_with(|| Value::Object(Default::default()));
        }
    }
    v
}

/// Numeric `format`s schemars writes for Rust integer and float types;
/// JSON Schema defines none of them, and validating clients warn on each.
const RUST_NUMBER_FORMATS: &[&str] = &[
    "int8", "int16", "int32", "int64", "int128", "uint", "uint8", "uint16", "uint32", "uint64",
    "uint128", "float", "double",
];

/// Tidies a generated schema for the clients that read it: each `true`
/// subschema (any value, as schemars renders a `serde_json::Value` field)
/// becomes the equivalent `{}` (the TypeScript SDK 1.x refuses a tool whose
/// property schema is a boolean), and Rust numeric formats are dropped
/// (`minimum`/`maximum` still bound the value).
fn objects_for_any(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if map
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| RUST_NUMBER_FORMATS.contains(&f))
            {
                map.remove("format");
            }
            for (key, sub) in map.iter_mut() {
                let holds_schemas = matches!(
                    key.as_str(),
                    "properties" | "patternProperties" | "$defs" | "definitions"
                );
                if holds_schemas && let Value::Object(subs) = sub {
                    for s in subs.values_mut() {
                        if *s == Value::Bool(true) {
                            *s = Value::Object(Default::default());
                        }
                    }
                }
                if matches!(key.as_str(), "items" | "additionalProperties")
                    && *sub == Value::Bool(true)
                {
                    *sub = Value::Object(Default::default());
                }
                objects_for_any(sub);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(objects_for_any),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct WithAny {
        job: String,
        result: Value,
        list: Vec<Value>,
        pages: u32,
    }

    #[test]
    fn any_value_is_an_empty_schema_not_true() {
        let s = schema_of::<WithAny>();
        assert_eq!(s["properties"]["result"], serde_json::json!({}), "{s}");
        assert_eq!(
            s["properties"]["list"]["items"],
            serde_json::json!({}),
            "{s}"
        );
        assert_eq!(s["properties"]["job"]["type"], "string");
        assert_eq!(s["properties"]["pages"].get("format"), None, "{s}");
        assert_eq!(s["properties"]["pages"]["minimum"], 0);
    }
}
