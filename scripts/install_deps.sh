# Sourced by scripts/test.sh and scripts/train.sh: installs the Debian 12 packages the build needs when
# they are missing (as root, or through sudo), and says what to install otherwise. A script that needs more sets
# LAB_EXTRA_PACKAGES (an array) before sourcing this.
LAB_PACKAGES=(
  cmake ninja-build g++ pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-openmp-dev libopenmpi-dev openmpi-bin
  libboost-context-dev
  clang-16 libc++-16-dev libc++abi-16-dev libomp-16-dev
  python3 python3-numpy python3-matplotlib
  ${LAB_EXTRA_PACKAGES[@]+"${LAB_EXTRA_PACKAGES[@]}"}
)
lab_missing=()
for pkg in "${LAB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || lab_missing+=("$pkg")
done
if [[ ${#lab_missing[@]} -gt 0 ]]; then
  echo "== installing: ${lab_missing[*]}"
  if [[ $(id -u) == 0 ]]; then lab_sudo=(); elif command -v sudo >/dev/null; then lab_sudo=(sudo); else
    echo "missing packages: ${lab_missing[*]} (install them with apt-get as root)" >&2; exit 1
  fi
  "${lab_sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${lab_sudo[@]}" apt-get install -y -qq --no-install-recommends "${lab_missing[@]}"
fi
unset lab_missing lab_sudo
