#!/usr/bin/env bash
# Layers of real models and other shapes outside workloads.md, against cuDNN in the same run:
# the "Layers of real models" table of docs/performance.md. Runs on the GPU machine after a
# build (scripts/gpu-check.sh), e.g.
#   BUILD=/tmp/bg scripts/bench-layers.sh > layers.md
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
BENCH=${BUILD:-build-gpu}/apps/bench_cuda/convbank-bench-cuda
RUNS=${RUNS:-20}
# label | op | N,Cin,Cout,L,K,stride,padding,dilation,groups | padding mode
LAYERS=(
  "HiFi-GAN conv_pre|conv1d|8,80,512,512,7,1,3,1,1|zeros"
  "HiFi-GAN resblock, K 3|conv1d|8,256,256,4096,3,1,3,3,1|zeros"
  "HiFi-GAN resblock, K 7|conv1d|8,256,256,4096,7,1,15,5,1|zeros"
  "HiFi-GAN resblock, K 11|conv1d|8,256,256,4096,11,1,5,1,1|zeros"
  "HiFi-GAN resblock, K 11|conv1d|8,256,256,4096,11,1,25,5,1|zeros"
  "HiFi-GAN resblock, K 11|conv1d|8,128,128,32768,11,1,15,3,1|zeros"
  "HiFi-GAN resblock, K 7|conv1d|8,128,128,32768,7,1,9,3,1|zeros"
  "HiFi-GAN last resblock, K 11|conv1d|8,32,32,131072,11,1,5,1,1|zeros"
  "HiFi-GAN last resblock, K 3|conv1d|8,32,32,131072,3,1,5,5,1|zeros"
  "HiFi-GAN conv_post|conv1d|8,32,1,131072,7,1,3,1,1|zeros"
  "K 11, 512 channels|conv1d|16,512,512,4096,11,1,5,1,1|zeros"
  "EnCodec-like downsampling, stride 2|conv1d|8,32,64,131072,4,2,1,1,1|zeros"
  "EnCodec-like downsampling, stride 4|conv1d|8,64,128,65536,8,4,2,1,1|zeros"
  "EnCodec-like downsampling, stride 5|conv1d|8,128,256,16384,10,5,3,1,1|zeros"
  "EnCodec-like downsampling, stride 8|conv1d|8,256,512,3277,16,8,4,1,1|zeros"
  "EnCodec-like downsampling, stride 4, reflect|conv1d|8,64,128,65536,8,4,2,1,1|reflect"
  "SEANet-like K 7, reflect|conv1d|8,64,128,65536,7,1,3,1,1|reflect"
  "SEANet-like K 7, 32 channels, reflect|conv1d|8,32,32,131072,7,1,3,1,1|reflect"
  "K 3, reflect|conv1d|16,128,128,32768,3,1,1,1,1|reflect"
  "K 3 dilation 3, replicate|conv1d|8,256,256,4096,3,1,3,3,1|replicate"
  "K 7, 512 channels, reflect|conv1d|16,512,512,4096,7,1,3,1,1|reflect"
  "K 5, circular|conv1d|16,40,72,16384,5,1,2,1,1|circular"
  "K 5, dilation 101|conv1d|8,128,128,32768,5,1,202,101,1|zeros"
  "K 7, dilation 32|conv1d|8,128,128,32768,7,1,96,32,1|zeros"
  "K 4, dilation 200|conv1d|8,128,128,32768,4,1,300,200,1|zeros"
  "K 5, dilation 200|conv1d|8,128,128,32768,5,1,400,200,1|zeros"
  "K 3, dilation 250|conv1d|16,128,128,32768,3,1,250,250,1|zeros"
  "K 3, dilation 243, odd rows|conv1d|16,128,128,32767,3,1,243,243,1|zeros"
  "K 3, dilation 1001|conv1d|16,128,128,65536,3,1,1001,1001,1|zeros"
  "K 3, dilation 2048|conv1d|16,128,128,65536,3,1,2048,2048,1|zeros"
  "K 3, dilation 333, 64 channels|conv1d|16,64,64,32768,3,1,333,333,1|zeros"
  "HiFi-GAN upsampler 1|conv-transpose1d|8,512,256,512,16,8,4,1,1|zeros"
  "HiFi-GAN upsampler 2|conv-transpose1d|8,256,128,4096,16,8,4,1,1|zeros"
  "HiFi-GAN upsampler 3|conv-transpose1d|8,128,64,32768,4,2,1,1,1|zeros"
  "HiFi-GAN upsampler 4|conv-transpose1d|8,64,32,65536,4,2,1,1,1|zeros"
  "EnCodec-like upsampling, stride 8|conv-transpose1d|8,512,256,410,16,8,4,1,1|zeros"
  "EnCodec-like upsampling, stride 5|conv-transpose1d|8,256,128,3277,10,5,3,1,1|zeros"
  "EnCodec-like upsampling, stride 4|conv-transpose1d|8,128,64,16384,8,4,2,1,1|zeros"
  "8 taps per phase, stride 2|conv-transpose1d|8,128,64,32768,16,2,7,1,1|zeros"
  "8 taps per phase, stride 8|conv-transpose1d|8,64,32,65536,64,8,28,1,1|zeros"
  "K 3, dilation 250|conv-transpose1d|16,128,128,32768,3,1,250,250,1|zeros"
  "Whisper-like conv1, batch 1|conv1d|1,80,512,3000,3,1,1,1,1|zeros"
  "Whisper-like conv2, K 3 stride 2, batch 1|conv1d|1,512,512,3000,3,2,1,1,1|zeros"
  "Whisper-like conv2, K 3 stride 2, batch 8|conv1d|8,512,512,3000,3,2,1,1,1|zeros"
  "FIR bank 1 -> 64, K 512, stride 1|conv1d|4,1,64,131072,512,1,256,1,1|zeros"
  "depthwise FIR, K 129|conv1d|8,64,64,65536,129,1,64,1,64|zeros"
  "K 15, 64 channels|conv1d|8,64,64,65536,15,1,7,1,1|zeros"
  "K 31, 64 channels|conv1d|8,64,64,65536,31,1,15,1,1|zeros"
  "ConvTranspose1d K 3 stride 2|conv-transpose1d|8,256,128,16384,3,2,1,1,1|zeros"
)
echo "# convbank-bench-cuda, $(date -u '+%Y-%m-%d %H:%M UTC'), median of $RUNS runs; cuDNN pads with zeros only (other modes: its time for the layer with zeros padding)"
echo
echo "| layer | op | shape | kernel | ours ms | cuDNN fp32 ms | cuDNN/ours | rel L2 ours | cuDNN TF32 ms |"
echo "|---|---|---|---|---|---|---|---|---|"
for entry in "${LAYERS[@]}"; do
  IFS='|' read -r label op shape mode <<<"$entry"
  "$BENCH" --runs "$RUNS" --op "$op" --shape "$shape" --padding-mode "$mode" 2>/dev/null |
    awk -F'|' -v label="$label" '/^\| custom/ {
      gsub(/^ +| +$/, "", $3); gsub(/^ +| +$/, "", $4); gsub(/^ +| +$/, "", $5)
      printf "| %s | %s | %s | %s |%s|%s|%s|%s|%s|\n", label, $3, $4, $5, $6, $10, $11, $13, $15 }'
done
