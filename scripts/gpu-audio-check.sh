#!/usr/bin/env bash
# The audio app on the GPU machine, which has no libsndfile: `prepare` (here, on Debian) fetches
# libsndfile and its codecs as .debs and unpacks them into .sndfile/ (ignored by git); `run` (on
# the GPU machine, with .sndfile and a tree snapshot carried) builds against them and runs
# convbank process / stream --check / analyze with --device cuda next to --device cpu, then the
# audio-app, filter-bank and data tests.
#
#   bash scripts/gpu-audio-check.sh prepare                 # here
#   echo /.sndfile/ >> .git/info/exclude
#   run(command="bash scripts/gpu-audio-check.sh run", carry=[".sndfile"])   # device tool
set -u -o pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  prepare)
    rm -rf .sndfile && mkdir -p .sndfile/debs
    (cd .sndfile/debs && apt-get download libsndfile1 libsndfile1-dev libflac12 libogg0 \
      libvorbis0a libvorbisenc2 libopus0 libmpg123-0 libmp3lame0 pkgconf pkgconf-bin \
      libpkgconf3 pkg-config)
    for f in .sndfile/debs/*.deb; do dpkg -x "$f" .sndfile/root; done
    rm -rf .sndfile/debs
    pc=.sndfile/root/usr/lib/x86_64-linux-gnu/pkgconfig/sndfile.pc
    # Relocatable, and without the codecs' own .pc files (only needed for static linking).
    sed -i -e 's|^prefix=.*|prefix=${pcfiledir}/../../..|' -e 's|^Requires.private:.*|Requires.private:|' "$pc"
    ;;
  run)
    R=$PWD/.sndfile/root
    export PATH=/usr/local/cuda/bin:$R/usr/bin:$PATH
    export LD_LIBRARY_PATH=$R/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
    export PKG_CONFIG_LIBDIR=$R/usr/lib/x86_64-linux-gnu/pkgconfig
    OUT=${OUT:-/tmp}
    B=${BUILD:-/tmp/build-gpu-audio}
    cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DCONVBANK_ENABLE_CUDA=ON -DCONVBANK_ENABLE_SNDFILE=ON \
      -DPKG_CONFIG_EXECUTABLE="$R/usr/bin/pkgconf" >"$OUT/configure.log" 2>&1 ||
      { tail -20 "$OUT/configure.log"; exit 1; }
    ninja -C "$B" -j16 convbank_app convbank_tests >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
    A=$B/apps/convbank
    D=data/audio
    o=$(mktemp -d)
    for dev in cpu cuda; do
      "$A" process $D/speech_16k_mono_noisy.wav "$o/$dev.wav" --device $dev
      "$A" process $D/speech_48k_stereo_noisy.wav "$o/${dev}48.wav" --device $dev --quiet
    done
    "$A" snr $D/speech_16k_mono_clean.wav $D/speech_16k_mono_noisy.wav "$o/cpu.wav" "$o/cuda.wav"
    "$A" snr $D/speech_48k_stereo_clean.wav "$o/cpu48.wav" "$o/cuda48.wav"
    echo "cuda against cpu:"; "$A" snr "$o/cpu48.wav" "$o/cuda48.wav"
    "$A" process $D/speech_16k_stereo_noisy.flac "$o/none.wav" --device cuda \
      --preset stft:n_fft=512,hop=128 --effect none --subtype float --quiet
    "$A" snr $D/speech_16k_stereo_noisy.flac "$o/none.wav"
    "$A" stream $D/speech_48k_stereo_noisy.wav "$o/s.wav" --chunk 480 --device cuda --check
    "$A" stream $D/speech_16k_mono_noisy.wav "$o/s2.wav" --chunk 256 --device cuda --check
    "$A" analyze $D/speech_16k_stereo_clean.wav -o "$o/f.npy" --device cuda \
      --preset mel:n_filters=40,n_fft=512,hop=160
    "$B/tests/convbank_tests" -tc='audio app*,filterbank*,data*,cuda:stream*' 2>&1 | tail -3
    ;;
  *)
    echo "usage: $0 prepare|run" >&2
    exit 2
    ;;
esac
