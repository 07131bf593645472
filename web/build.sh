#!/usr/bin/env bash
# Rebuilds the browser SDK's wasm bundle from crates/harmony-wasm, reproducibly:
#   web/build.sh            -> web/sdk/pkg/ (committed; CI rebuilds it and `git diff --exit-code`s it)
#   web/build.sh --vectors  -> target/wasm-vectors/ (the test bundle with the seeded `vectorItem`
#                              of the shared test vectors; never committed, never shipped)
# Needs the wasm32-unknown-unknown target and wasm-bindgen-cli at the version pinned in
# crates/harmony-wasm/Cargo.toml (`cargo install wasm-bindgen-cli --version 0.2.130`). No Node.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
want=0.2.130
have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [ "$have" != "$want" ]; then
  echo "wasm-bindgen $want needed (found '${have:-none}'): cargo install wasm-bindgen-cli --version $want" >&2
  exit 1
fi
features=()
out=web/sdk/pkg
if [ "${1:-}" = "--vectors" ]; then
  features=(--features vectors)
  out=target/wasm-vectors
fi
# No build paths in the .wasm (panic locations): the checkout and the cargo home are remapped.
export RUSTFLAGS="--remap-path-prefix=$root=/harmony --remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}=/cargo"
# Its own target dir: these RUSTFLAGS would otherwise invalidate target/'s wasm32 artifacts.
cargo build -q -p harmony-wasm --target wasm32-unknown-unknown --profile wasm --target-dir target/wasm "${features[@]}"
rm -rf "$out"
# wasm-bindgen warns that `strip = true` removed the target_features section: harmless here
# (the default wasm32 features; no wasm-opt step, the profile's `strip` keeps the bundle small).
wasm-bindgen --target web --out-dir "$out" --out-name harmony_wasm \
  target/wasm/wasm32-unknown-unknown/wasm/harmony_wasm.wasm
rm -f "$out/.gitignore"
wasm=$out/harmony_wasm_bg.wasm
echo "$out: $(wc -c < "$wasm") bytes wasm, $(gzip -9n < "$wasm" | wc -c) gzipped; JS glue $(cat "$out/harmony_wasm.js" | gzip -9n | wc -c) gzipped"
