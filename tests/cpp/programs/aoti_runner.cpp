// Runs an AOTInductor package of c10d_func collectives with no Python interpreter: the ops, the
// group registry and the shared-memory transport come from libc10d_func.so, the world from the
// env:// variables (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE). This is how an exported graph
// is deployed in a C++ server; torch's functional collectives cannot run there (their groups are
// registered by Python code).
//
// Usage: c10d_func_aoti_runner PACKAGE ROWS COLS OUTPUT_DIR
// Rank r's input is x[i] = ((i mod 17) - 8) / 4 + r, of shape [ROWS, COLS]; the package runs
// twice and the second run's outputs are written to OUTPUT_DIR/rank<r>.pt with torch::pickle_save
// (torch.load reads them), for the test to compare with its reference.
#include <ATen/ATen.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: " << argv[0] << " PACKAGE ROWS COLS OUTPUT_DIR\n";
    return 2;
  }
  const char* rank_text = std::getenv("RANK");
  if (rank_text == nullptr) {
    std::cerr << "RANK is not set (the world comes from env://)\n";
    return 2;
  }
  try {
    const int64_t rank = std::stoll(rank_text);
    const int64_t rows = std::stoll(argv[2]);
    const int64_t cols = std::stoll(argv[3]);
    const at::Tensor x =
        (at::arange(rows * cols, at::kLong).remainder(17) - 8).to(at::kFloat) / 4 + rank;
    torch::inductor::AOTIModelPackageLoader loader(argv[1]);
    std::vector<at::Tensor> outputs;
    for (int run = 0; run < 2; ++run) {
      outputs = loader.run({x.reshape({rows, cols})});
    }
    c10::List<at::Tensor> saved;
    for (const auto& output : outputs) {
      saved.push_back(output);
    }
    const std::vector<char> bytes = torch::jit::pickle_save(c10::IValue(saved));
    const std::string path = std::string(argv[4]) + "/rank" + std::to_string(rank) + ".pt";
    std::ofstream(path, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    std::cout << "rank " << rank << ": " << outputs.size() << " outputs\n";
    return 0;
  } catch (const std::exception& error) {
    std::cerr << "rank " << rank_text << ": " << error.what() << "\n";
    return 1;
  }
}
