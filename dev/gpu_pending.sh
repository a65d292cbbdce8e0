#!/bin/bash
# The GPU runs issues 21 and 23 wait on, in the order they matter, each under its own timeout, logs
# and JSON under $OUT (the device machine's output folder). Run on the device machine:
#   bash .gpu/enter bash dev/gpu_pending.sh [checks|spot|lighthouse|forms|paths|spot_seed SEED|…]
# `checks` (about 5 minutes): the GPU tests of the kernels changed since the last GPU run, the
# masked decode's forms, Spot's selection stage kernel by kernel (selectOpen at 256/512/1024
# invocations) and the op parity suite (pyramidGather/pyramidScatter among it); `spot` (about 5): Spot's decode bench beside SDPA and a model's tokens/s;
# `lighthouse` (about 5): its GPU tests and the layer's forward+backward beside SDPA, 32K–512K;
# `lighthouse_exp` (about 5): Lighthouse then recovery against dense training at 32K tokens, 3 seeds.
# Spot's experiments are longer and run on their own (commands in the closing note).
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
what=${1:-all}
step() { local t=$1 name=$2; shift 2; echo "== $name (timeout ${t}s)"; timeout "$t" "$@" > "$OUT/$name.log" 2>&1; echo "   rc $?"; tail -n 3 "$OUT/$name.log"; }
if [ "$what" = checks ] || [ "$what" = all ]; then
  FON_REQUIRE_WEBGPU=1 step 150 gpu_tests node --import tsx --test test/attention/spot_decode.test.ts test/attention/spot_webgpu.test.ts \
    test/backend/webgpu_select.test.ts test/attention/lighthouse_webgpu.test.ts test/backend/webgpu_layout.test.ts test/backend/webgpu_attention.test.ts
  step 150 spot_forms node --import tsx dev/kernels/spot_decode.ts --tokens 131072
  step 90 select_open node --import tsx dev/kernels/select_open.ts
  FON_REQUIRE_WEBGPU=1 step 120 parity node --import tsx --test test/backend/webgpu_parity.test.ts
fi
if [ "$what" = spot ] || [ "$what" = all ]; then
  step 200 spot_bench node --import tsx bench/spot.ts --tokens 16384,65536,131072,262144,524288 --rules top-k:0.5,top-p:0.9,top-k:0.1 --keys f16 --json "$OUT/spot_bench.json"
  step 300 spot_model node --import tsx bench/spot.ts --tokens 131072 --rules top-k:0.1 --keys f16 --model-layers 4 --model-tokens 131072,524288 --json "$OUT/spot_model.json"
fi
if [ "$what" = lighthouse ] || [ "$what" = all ]; then
  FON_REQUIRE_WEBGPU=1 step 70 lighthouse_tests node --import tsx --test test/attention/lighthouse_webgpu.test.ts test/backend/webgpu_layout.test.ts
  step 90 lighthouse_gather node --import tsx dev/kernels/lighthouse_gather.ts --tokens 32768,131072
  step 200 lighthouse_bench node --import tsx bench/lighthouse.ts --tokens 32768,131072,262144,524288 --dense-max 32768 --json "$OUT/lighthouse_bench.json"
fi
if [ "$what" = lighthouse_exp ]; then
  step 330 lighthouse_exp node --import tsx experiments/lighthouse.ts --backend webgpu --seeds 1,2,3 --context 32768 --steps 200 --batch 1 --json "$OUT/lighthouse_32k.json"
fi
# `lighthouse_one`: the least that answers issue 23 in one call (about 8 minutes): the GPU tests of the
# layer, the bench at 32K–512K beside SDPA, and the experiment at 16K tokens, 3 seeds.
if [ "$what" = lighthouse_one ]; then
  FON_REQUIRE_WEBGPU=1 step 40 lighthouse_tests node --import tsx --test test/attention/lighthouse_webgpu.test.ts
  step 200 lighthouse_bench node --import tsx bench/lighthouse.ts --tokens 32768,131072,262144,524288 --dense-max 32768 --json "$OUT/lighthouse_bench.json"
  step 240 lighthouse_exp node --import tsx experiments/lighthouse.ts --backend webgpu --seeds 1,2,3 --context 16384 --steps 200 --batch 2 --eval-windows 4 --schedule cosine --json "$OUT/lighthouse_16k.json"
fi
# `lighthouse_sparse` (about 2.5 minutes): item 4c, recovery into a sparse target (a sliding window of
# 1024) against that target trained throughout, 16K tokens, 3 seeds.
if [ "$what" = lighthouse_sparse ] || [ "$what" = session2 ]; then
  step 170 lighthouse_sparse node --import tsx experiments/lighthouse.ts --backend webgpu --seeds 1,2,3 --context 16384 --steps 200 --batch 2 --eval-windows 4 --target local:1024 --schedule cosine --json "$OUT/lighthouse_16k_local.json"
fi
# `session2` (about 9 minutes): the above, then Spot's GPU tests and its decode bench beside SDPA.
if [ "$what" = session2 ]; then
  FON_REQUIRE_WEBGPU=1 step 150 gpu_tests node --import tsx --test test/attention/spot_decode.test.ts test/attention/spot_webgpu.test.ts \
    test/backend/webgpu_select.test.ts test/backend/webgpu_layout.test.ts test/backend/webgpu_attention.test.ts
  step 200 spot_bench node --import tsx bench/spot.ts --tokens 16384,65536,131072,262144,524288 --rules top-k:0.5,top-p:0.9,top-k:0.1 --keys f16 --json "$OUT/spot_bench.json"
fi
# `spot_model` (about 6 minutes): a 4-layer model's tokens/s with Spot (top-K 0.1, both decode
# paths) and with full attention at 128K and 512K, each row printed as it is measured, and the
# decode bench at 128K and 512K again. Owed since 2026-12-07 (the seventh run lost its model rows),
# like `forms`.
if [ "$what" = spot_model ]; then
  step 300 spot_model node --import tsx bench/spot.ts --tokens 131072 --rules top-k:0.1 --keys f16 --paths mask,gather --model-layers 4 --model-tokens 131072,524288 --json "$OUT/spot_model.json"
  step 90 spot_bench_wg node --import tsx bench/spot.ts --tokens 131072,524288 --rules top-k:0.1,top-k:0.5 --keys f16 --json "$OUT/spot_bench_wg.json"
fi
# `lighthouse_const` (about 4 minutes): the 16K experiment under the paper's schedule (warm-up, then a
# constant rate through both phases, §1.11/§1.13), 300 steps (60 of recovery), 3 seeds.
if [ "$what" = lighthouse_const ]; then
  step 260 lighthouse_const node --import tsx experiments/lighthouse.ts --backend webgpu --seeds 1,2,3 --context 16384 --steps 300 --batch 2 --eval-windows 4 --schedule constant --json "$OUT/lighthouse_16k_const.json"
fi
# `lighthouse_long` (about 4.5 minutes): the 16K experiment three times longer (600 steps: 120 of
# recovery against 40), seeds 1 and 2: does the loss after recovery close on dense's?
if [ "$what" = lighthouse_long ]; then
  step 290 lighthouse_long node --import tsx experiments/lighthouse.ts --backend webgpu --seeds 1,2 --context 16384 --steps 600 --batch 2 --eval-windows 4 --json "$OUT/lighthouse_16k_600.json"
fi
# `forms` (about 6 minutes): the masked decode's forms at 128K (VBLK, and the nolist-vidx / nolist-kidx
# patches, and `all` and `ur`: where the 3.4× per key lies), the few-rows GEMM's tests and its forms on
# 16-bit weights (dev/kernels/gemv.ts), and selectOpen's threshold searches cut to 0, 4 and 8 rounds.
if [ "$what" = forms ]; then
  step 170 spot_forms node --import tsx dev/kernels/spot_decode.ts --tokens 131072
  FON_REQUIRE_WEBGPU=1 step 60 gemv_tests node --import tsx --test --test-name-pattern few-rows test/backend/webgpu_matmul.test.ts
  step 90 gemv node --import tsx dev/kernels/gemv.ts --dtypes f16
  step 120 select_rounds node --import tsx dev/kernels/select_open.ts --wg 512
fi
# `paths` (about 6 minutes): the GPU tests of what changed since (the flags-form gather since removed, Spot's gathered path,
# the few-rows GEMM's vec form, kvWrite's row kernel), then Spot's two decode paths (mask, gather)
# beside SDPA at 128K and 512K for top-K 0.1 and 0.5 with each dispatch's GPU time, and a
# 4-layer model's tokens/s at 128K with each path under top-K 0.1, a token profiled.
if [ "$what" = paths ]; then
  FON_REQUIRE_WEBGPU=1 step 90 gpu_tests node --import tsx --test test/backend/webgpu_select.test.ts test/attention/spot_webgpu.test.ts test/backend/webgpu_matmul.test.ts
  FON_REQUIRE_WEBGPU=1 step 40 kv_tests node --import tsx --test --test-name-pattern kvWrite test/backend/webgpu_attention.test.ts
  step 120 spot_paths node --import tsx bench/spot.ts --tokens 131072,524288 --rules top-k:0.1,top-k:0.5 --keys f16 --paths mask,gather --profile --json "$OUT/spot_paths.json"
  step 130 spot_paths_model node --import tsx bench/spot.ts --tokens 131072 --rules top-k:0.1 --keys f16 --paths mask,gather --model-layers 4 --model-tokens 131072 --profile --json "$OUT/spot_paths_model.json"
fi
# `spot_seed` SEED (about 4 minutes a seed): the retrieval experiment with the teacher that retrieves
# up to 8× (RESULTS.md: a 2000-step stage at 8192), one seed.
if [ "$what" = spot_seed ]; then
  s=${2:?seed}
  step 290 spot_seed$s node --import tsx experiments/spot.ts --backend webgpu --seeds "$s" --short-length 128 --short-steps 5000 --length 1024 --steps 1000 --batch 32 --mix 0.1,0.1 --spot-steps 200 --multiples 1,2,4,8 --depths 0.1,0.3,0.5,0.7,0.9 --trials 10 --keys f16,int4 --layers 2 --d-model 256 --heads 4 --head-dim 64 --mlp-hidden 768 --spot-length 1024 --long-length 8192 --long-steps 2000 --long-batch 4 --long-lr 3e-4 --long-mix 0.3,0.3 --json "$OUT/spot_long2000_seed$s.json"
fi
# `fused` (about 6 minutes): the GPU tests of what changed on 2026-12-07 (selectOpen's spans in
# registers and selectBlockList, matmulMany, kvWriteMany, the masked decode with known counts), Spot's
# two decode paths beside SDPA at 128K and 512K with each dispatch's GPU time, and selectOpen's
# register form beside the earlier global one.
if [ "$what" = fused ]; then
  FON_REQUIRE_WEBGPU=1 step 170 gpu_tests node --import tsx --test test/backend/webgpu_select.test.ts test/attention/spot_webgpu.test.ts test/attention/spot_decode.test.ts
  FON_REQUIRE_WEBGPU=1 step 100 gpu_tests2 node --import tsx --test --test-name-pattern "matmulMany|few-rows|kvWrite" test/backend/webgpu_matmul.test.ts test/backend/webgpu_attention.test.ts
  step 130 spot_fused node --import tsx bench/spot.ts --tokens 131072,524288 --rules top-k:0.1,top-k:0.5 --keys f16 --paths mask,gather --profile --json "$OUT/spot_fused.json"
  step 90 select_forms node --import tsx dev/kernels/select_open.ts --tokens 131072,524288 --rules top-k:0.1,top-p:0.9 --wg 512,1024
fi
# `table` (about 7 minutes): the decode bench at 16K–512K (top-K 0.1 and 0.5 both paths, top-p 0.9)
# beside SDPA, then a 4-layer model's tokens/s at 128K and 512K.
if [ "$what" = table ]; then
  step 220 spot_table node --import tsx bench/spot.ts --tokens 16384,65536,131072,262144,524288 --rules top-k:0.1,top-k:0.5,top-p:0.9 --keys f16 --paths mask,gather --json "$OUT/spot_table.json"
  step 300 spot_model node --import tsx bench/spot.ts --tokens 131072 --rules top-k:0.1 --keys f16 --paths mask,gather --model-layers 4 --model-tokens 131072,524288 --json "$OUT/spot_model.json"
fi
# `final` (about 6 minutes): selectOpen's tests (its sums and scans by subgroup), Spot's two decode
# paths at 128K and 512K under noGrad (the projections in one matmulMany) with each dispatch's GPU
# time, and the masked decode's forms at 128K (the patches `all` and `ur` owed since 2026-12-07).
if [ "$what" = final ]; then
  FON_REQUIRE_WEBGPU=1 step 90 gpu_tests node --import tsx --test test/backend/webgpu_select.test.ts test/attention/spot_webgpu.test.ts
  step 130 spot_final node --import tsx bench/spot.ts --tokens 131072,524288 --rules top-k:0.1,top-k:0.5 --keys f16 --paths mask,gather --profile --json "$OUT/spot_final.json"
  step 170 spot_forms node --import tsx dev/kernels/spot_decode.ts --tokens 131072
fi
# `gather` (about 1.5 minutes): gatherListed's GPU tests and Spot's gathered path (top-K 0.1, 0.5)
# beside SDPA at 128K and 512K, each dispatch's GPU time at top-K 0.1.
if [ "$what" = gather ]; then
  FON_REQUIRE_WEBGPU=1 step 60 gpu_tests node --import tsx --test --test-name-pattern "gather|Gather" test/backend/webgpu_select.test.ts test/attention/spot_webgpu.test.ts
  step 100 spot_gather node --import tsx bench/spot.ts --tokens 131072,524288 --rules top-k:0.1 --keys f16 --paths gather,mask --profile --json "$OUT/spot_gather.json"
fi
# `next` (about 8 minutes; owed since the end of 2026-12-07): what the eighth run left untimed. The
# GPU tests of what changed after it (the batch-65 known-counts decode, selectOpen's kept_at,
# gatherListed's word rows), the whole table at 16K–512K under noGrad with the
# gather from the list and selectWg's 512 up to 8,192 blocks, a 4-layer model's tokens/s with the new
# gather, and the few-rows GEMM's forms on 16-bit weights (dev/kernels/gemv.ts, never run).
if [ "$what" = next ]; then
  FON_REQUIRE_WEBGPU=1 step 90 gpu_tests node --import tsx --test test/attention/spot_decode.test.ts test/backend/webgpu_select.test.ts test/attention/spot_webgpu.test.ts
  step 200 spot_table node --import tsx bench/spot.ts --tokens 16384,65536,131072,262144,524288 --rules top-k:0.1,top-k:0.5,top-p:0.9 --keys f16 --paths mask,gather --json "$OUT/spot_table.json"
  step 150 spot_model node --import tsx bench/spot.ts --tokens 131072 --rules top-k:0.1 --keys f16 --paths gather --model-layers 4 --model-tokens 131072,524288 --json "$OUT/spot_model.json"
  step 90 gemv node --import tsx dev/kernels/gemv.ts --dtypes f16
fi
# `radix` (about 5 minutes): selectOpen's count search by radix select (8-bit digits, workgroup
# atomics) — its GPU tests, the selection stage beside the 4-bit digit search at 128K and 512K, and
# Spot's two decode paths beside SDPA at 128K and 512K with each dispatch's GPU time.
if [ "$what" = radix ]; then
  FON_REQUIRE_WEBGPU=1 step 90 gpu_tests node --import tsx --test test/backend/webgpu_select.test.ts
  step 120 select_radix node --import tsx dev/kernels/select_open.ts --tokens 131072,524288 --rules top-k:0.1,top-p:0.9 --wg 512,1024
  step 100 spot_radix node --import tsx bench/spot.ts --tokens 131072,524288 --rules top-k:0.1 --keys f16 --paths gather,mask --profile --json "$OUT/spot_radix.json"
fi
# `lanes` (about 4 minutes): the LANES split pass (attention_decode_lanes.wgsl) — its GPU test, its
# forms beside the step kernel at 128K and 512K (dev/kernels/spot_decode.ts --lanes), and Spot's two
# decode paths beside SDPA at 128K and 512K with each dispatch's GPU time (the masked path now LANES).
if [ "$what" = lanes ]; then
  FON_REQUIRE_WEBGPU=1 step 60 gpu_tests node --import tsx --test --test-name-pattern LANES test/attention/spot_decode.test.ts
  step 120 lanes_forms node --import tsx dev/kernels/spot_decode.ts --tokens 131072,524288 --lanes
  step 100 spot_lanes node --import tsx bench/spot.ts --tokens 131072,524288 --rules top-k:0.1 --keys f16 --paths gather,mask --profile --json "$OUT/spot_lanes.json"
fi
# `lanes2` (about 6 minutes): LANES with V loaded before the scores and 4 iterations a chunk — the
# GPU tests of Spot's decode, selection and layer, its forms at 128K, and the decode table at
# 16K–512K (top-K 0.1 and 0.5 both paths, top-p 0.9) beside SDPA.
if [ "$what" = lanes2 ]; then
  FON_REQUIRE_WEBGPU=1 step 120 gpu_tests node --import tsx --test test/attention/spot_decode.test.ts test/backend/webgpu_select.test.ts test/attention/spot_webgpu.test.ts
  step 70 lanes_forms node --import tsx dev/kernels/spot_decode.ts --tokens 131072 --lanes
  step 220 spot_table node --import tsx bench/spot.ts --tokens 16384,65536,131072,262144,524288 --rules top-k:0.1,top-k:0.5,top-p:0.9 --keys f16 --paths mask,gather --json "$OUT/spot_table.json"
fi
# `ur` (about 4 minutes): LANES with its loops written out (UR, now the default) — its GPU test, its
# forms at 128K, selectBlockList's writes at 128K (which of the table, the zeros and the flags cost),
# and Spot's masked path beside SDPA at 128K and 512K with each dispatch's GPU time.
if [ "$what" = ur ]; then
  FON_REQUIRE_WEBGPU=1 step 60 gpu_tests node --import tsx --test --test-name-pattern LANES test/attention/spot_decode.test.ts
  step 90 lanes_forms node --import tsx dev/kernels/spot_decode.ts --tokens 131072 --lanes
  step 60 select_list node --import tsx dev/kernels/select_open.ts --tokens 131072 --rules top-k:0.1 --wg 512
  step 80 spot_ur node --import tsx bench/spot.ts --tokens 131072,524288 --rules top-k:0.1 --keys f16 --paths mask --profile --json "$OUT/spot_ur.json"
fi
# `closing` (about 6 minutes): the GPU tests of what changed since the `ur` call (matmulMany's
# four-group steps, the Spot step's views), the masked decode table at 16K–512K (top-K 0.1 and 0.5,
# top-p 0.9) beside SDPA with each step's GPU time alone, and a 4-layer model's tokens/s at 128K and
# 512K (Spot top-K 0.1 through LANES against full attention).
if [ "$what" = closing ]; then
  FON_REQUIRE_WEBGPU=1 step 100 gpu_tests node --import tsx --test test/attention/spot_decode.test.ts test/attention/spot_webgpu.test.ts test/backend/webgpu_select.test.ts
  FON_REQUIRE_WEBGPU=1 step 60 gpu_tests2 node --import tsx --test --test-name-pattern "matmulMany|few-rows" test/backend/webgpu_matmul.test.ts
  step 200 spot_table node --import tsx bench/spot.ts --tokens 16384,65536,131072,262144,524288 --rules top-k:0.1,top-k:0.5,top-p:0.9 --keys f16 --paths mask --json "$OUT/spot_table.json"
  step 170 spot_model node --import tsx bench/spot.ts --tokens 131072 --rules top-k:0.1 --keys f16 --paths mask --model-layers 4 --model-tokens 131072,524288 --json "$OUT/spot_model.json"
fi
# `last` (about 2.5 minutes): the GPU tests of the selection without flags (NOFLAGS) and of the block
# scores over INT4 keys as stored, and Spot's masked step at 128K, top-K 0.1, f16 and INT4 keys,
# beside SDPA with each dispatch's GPU time.
if [ "$what" = last ]; then
  FON_REQUIRE_WEBGPU=1 step 60 gpu_tests node --import tsx --test test/backend/webgpu_select.test.ts test/attention/spot_webgpu.test.ts
  step 100 spot_last node --import tsx bench/spot.ts --tokens 131072 --rules top-k:0.1 --keys f16,int4 --paths mask --profile --json "$OUT/spot_last.json"
fi
# `pf` (about 4 minutes; owed since the end of 2026-12-07): LANES with each iteration's loads one
# ahead (DecodeTune.lanesPrefetch, PF) — its GPU test, its forms at 128K beside the default, and the
# GPU tests of what changed after the `last` call (the shared query load and list count:
# attention_decode_q.wgsl, mask_list_count; quantizeInt4's scales written as f16), then Spot's
# masked step at 128K with INT4 keys (one dispatch fewer a step) beside f16 keys.
if [ "$what" = pf ]; then
  FON_REQUIRE_WEBGPU=1 step 90 gpu_tests node --import tsx --test test/attention/spot_decode.test.ts test/backend/webgpu_attention.test.ts test/backend/webgpu_fox_fpa_decode.test.ts test/backend/webgpu_int4.test.ts test/attention/spot_webgpu.test.ts
  step 90 lanes_forms node --import tsx dev/kernels/spot_decode.ts --tokens 131072 --lanes
  step 90 spot_int4 node --import tsx bench/spot.ts --tokens 131072 --rules top-k:0.1 --keys f16,int4 --paths mask --profile --json "$OUT/spot_int4.json"
fi
# `pf2` (about 6 minutes; 2026-12-07, second session): `pf`'s tests and timings, and the forms timed
# for the first time — matmulMany at 128 and 256 lanes a column (SGT), index_scores with its words
# loaded ahead (PRE), the count search that stops at an exact digit — and the GPU tests of each.
if [ "$what" = pf2 ]; then
  FON_REQUIRE_WEBGPU=1 step 150 gpu_tests node --import tsx --test test/attention/spot_decode.test.ts test/backend/webgpu_attention.test.ts test/backend/webgpu_fox_fpa_decode.test.ts test/backend/webgpu_int4.test.ts test/attention/spot_webgpu.test.ts test/backend/webgpu_select.test.ts
  FON_REQUIRE_WEBGPU=1 step 60 gpu_tests2 node --import tsx --test --test-name-pattern "matmulMany|few-rows" test/backend/webgpu_matmul.test.ts
  step 60 gemv_many node --import tsx dev/kernels/gemv.ts --many
  step 60 index_forms node --import tsx dev/kernels/index_scores.ts --tokens 131072,524288
  step 60 select_open node --import tsx dev/kernels/select_open.ts --tokens 131072 --rules top-k:0.1 --wg 512
  step 90 lanes_forms node --import tsx dev/kernels/spot_decode.ts --tokens 131072 --lanes
  step 90 spot_int4 node --import tsx bench/spot.ts --tokens 131072 --rules top-k:0.1 --keys f16,int4 --paths mask --profile --json "$OUT/spot_int4.json"
fi
# `short` (about 4 minutes; 2026-12-07, second session, the one call the device took of eleven): the GPU
# tests of everything changed since the `last` call; a Spot step at 128K, top-K 0.1, with each new
# form alone (matmulMany at 256 and 128 lanes a column, index_scores PRE, LANES PF) beside the
# defaults, each dispatch's GPU time; dev/pick_forms.ts joins the forms that beat the defaults, and the
# decode table (16K–512K, top-K 0.1) runs with them. Run at tree b779fa7, whose defaults were 64 lanes
# in 128: many:256/256 won and is the default since (MANY_DEFAULTS), so `default` now means it.
if [ "$what" = short ]; then
  FON_REQUIRE_WEBGPU=1 step 80 gpu_tests node --import tsx --test test/attention/spot_decode.test.ts test/backend/webgpu_attention.test.ts test/backend/webgpu_fox_fpa_decode.test.ts test/backend/webgpu_int4.test.ts test/attention/spot_webgpu.test.ts test/backend/webgpu_select.test.ts
  FON_REQUIRE_WEBGPU=1 step 30 gpu_tests2 node --import tsx --test --test-name-pattern "matmulMany|few-rows" test/backend/webgpu_matmul.test.ts
  step 120 spot_forms node --import tsx bench/spot.ts --tokens 131072 --rules top-k:0.1 --keys f16 --paths mask --profile --forms "default;many:256/256;many:128/256;index-prefetch;lanes-prefetch" --json /tmp/spot_forms.json
  best=$(node --import tsx dev/pick_forms.ts /tmp/spot_forms.json 2>>"$OUT/spot_forms.log" || echo default)
  echo "   forms picked: $best" | tee -a "$OUT/spot_forms.log"
  step 100 spot_table node --import tsx bench/spot.ts --tokens 16384,65536,131072,262144,524288 --rules top-k:0.1 --keys f16 --paths mask --forms "$best" --json "$OUT/spot_table.json"
fi
