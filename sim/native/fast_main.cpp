// The fast simulation path: a Verilated `attenio_sim_top` driven from C++, no Python in the loop.
//
// `attenio.sim.fast` builds this file with Verilator beside the Verilog and a generated
// header `fast_config.h`, which names the in-design memory's storage array
// (ATTENIO_MEM(root)), its word size (ATTENIO_BEAT bytes) and its depth (ATTENIO_DEPTH).
// Only that array is public (a Verilator configuration file says so), so the rest of
// the model keeps every optimisation; the array is a contiguous little-endian image of
// the memory, so loading and reading back are memcpy.
//
// The program runs a script of one command a line (written by attenio.sim.fast from the
// same parameters the cocotb bench takes):
//
//   image PATH                 load the bytes of PATH at address 0
//   reset CYCLES SETTLE        hold rst for CYCLES cycles, then run SETTLE more
//   run                        begin a run record
//   fill ADDR LEN BYTE         backdoor: set LEN bytes from ADDR to BYTE
//   write OFFSET VALUE         an AXI4-Lite write
//   start OFFSET               write 1 to OFFSET (CTRL) and start counting cycles
//   wait OFFSET MASK POLL MAX PROGRESS
//                              read OFFSET (STATUS) every POLL cycles until a bit of MASK
//                              is set; fail after MAX cycles; every quarter second of wall
//                              time report the 64-bit register at PROGRESS (bytes written)
//   read32 NAME OFFSET         record a 32-bit register under NAME
//   read64 NAME OFFSET         record a 64-bit register (low word first: it latches the high)
//   dump ADDR LEN PATH         backdoor: write LEN bytes from ADDR to PATH
//
// Progress lines "CYCLES BYTES WALL_SECONDS" go to the file named by the second
// argument; the results go to the third, as JSON: {"runs": [{"sim_cycles", "wall_seconds",
// "cpu_seconds", "regs": {NAME: value}}]}.

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "Vtop.h"
#include "Vtop___024root.h"
#include "fast_config.h"
#include "verilated.h"

// Verilator spells the "__" of Amaranth's port names "___05F".
#define AXIL(port) s_axil___05F##port

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(const std::string& why) {
    std::fprintf(stderr, "attenio fast sim: %s\n", why.c_str());
    std::exit(3);
}

struct Run {
    uint64_t sim_cycles = 0;
    double wall_seconds = 0;
    double cpu_seconds = 0;     // this process's CPU time: a rate the machine's load cannot halve
    std::vector<std::pair<std::string, uint64_t>> regs;
};

class Harness {
  public:
    Harness(VerilatedContext* ctx, const char* progress_path)
        : top_(new Vtop(ctx, "")), progress_(std::fopen(progress_path, "w")) {
        if (!progress_) fail(std::string("cannot write ") + progress_path);
        static_assert(sizeof(ATTENIO_MEM(top_->rootp)[0]) == ATTENIO_BEAT,
                      "the memory's words are not one beat each");
        idle();
        top_->clk = 0;
        top_->rst = 1;
        top_->eval();
    }
    ~Harness() {
        top_->final();
        std::fclose(progress_);
    }

    uint8_t* memory() { return reinterpret_cast<uint8_t*>(&ATTENIO_MEM(top_->rootp)[0]); }
    static constexpr uint64_t memory_bytes = uint64_t(ATTENIO_BEAT) * ATTENIO_DEPTH;

    // One clock cycle: inputs set before it are seen at its rising edge.
    void tick() {
        top_->clk = 1;
        top_->eval();
        top_->clk = 0;
        top_->eval();
        ++cycles_;
    }
    void ticks(uint64_t n) {
        for (uint64_t i = 0; i < n; ++i) tick();
    }

    void reset(uint64_t cycles, uint64_t settle) {
        top_->rst = 1;
        ticks(cycles);
        top_->rst = 0;
        top_->eval();
        ticks(settle);
    }

    void write(uint32_t addr, uint32_t value) {
        top_->AXIL(awaddr) = addr;
        top_->AXIL(wdata) = value;
        top_->AXIL(awvalid) = 1;
        top_->AXIL(wvalid) = 1;
        top_->eval();
        for (bool aw = false, w = false; !(aw && w);) {
            bool aw_now = top_->AXIL(awvalid) && top_->AXIL(awready);
            bool w_now = top_->AXIL(wvalid) && top_->AXIL(wready);
            tick();
            aw |= aw_now;
            w |= w_now;
            if (aw) top_->AXIL(awvalid) = 0;
            if (w) top_->AXIL(wvalid) = 0;
            top_->eval();
        }
        top_->AXIL(bready) = 1;
        top_->eval();
        for (bool done = false; !done;) {
            done = top_->AXIL(bvalid);
            if (done && top_->AXIL(bresp) != 0)
                fail("CSR write to " + hex(addr) + " answered " + std::to_string(top_->AXIL(bresp)));
            tick();
        }
        top_->AXIL(bready) = 0;
        top_->eval();
    }

    uint32_t read(uint32_t addr) {
        top_->AXIL(araddr) = addr;
        top_->AXIL(arvalid) = 1;
        top_->eval();
        for (bool done = false; !done;) {
            done = top_->AXIL(arready);
            tick();
        }
        top_->AXIL(arvalid) = 0;
        top_->AXIL(rready) = 1;
        top_->eval();
        uint32_t value = 0;
        for (bool done = false; !done;) {
            done = top_->AXIL(rvalid);
            value = top_->AXIL(rdata);
            if (done && top_->AXIL(rresp) != 0) fail("CSR read of " + hex(addr) + " answered SLVERR");
            tick();
        }
        top_->AXIL(rready) = 0;
        top_->eval();
        return value;
    }

    uint64_t read64(uint32_t addr) {
        uint64_t lo = read(addr);
        return uint64_t(read(addr + 4)) << 32 | lo;
    }

    uint64_t cycles() const { return cycles_; }

    void progress(uint64_t cycles, uint64_t bytes, double wall) {
        std::fprintf(progress_, "%" PRIu64 " %" PRIu64 " %.3f\n", cycles, bytes, wall);
        std::fflush(progress_);
    }

  private:
    static std::string hex(uint32_t v) {
        char buf[16];
        std::snprintf(buf, sizeof buf, "%#x", v);
        return buf;
    }
    void idle() {
        top_->AXIL(awvalid) = top_->AXIL(wvalid) = top_->AXIL(bready) = 0;
        top_->AXIL(arvalid) = top_->AXIL(rready) = 0;
        top_->AXIL(awprot) = top_->AXIL(arprot) = 0;
        top_->AXIL(wstrb) = 0xF;
    }

    std::unique_ptr<Vtop> top_;
    std::FILE* progress_;
    uint64_t cycles_ = 0;
};

void check_range(uint64_t addr, uint64_t len) {
    if (addr + len > Harness::memory_bytes)
        fail("bytes " + std::to_string(addr) + ".." + std::to_string(addr + len) +
             " lie outside the memory model (" + std::to_string(Harness::memory_bytes) + " bytes)");
}

void write_results(const char* path, const std::vector<Run>& runs) {
    std::FILE* f = std::fopen(path, "w");
    if (!f) fail(std::string("cannot write ") + path);
    std::fprintf(f, "{\"runs\": [");
    for (size_t i = 0; i < runs.size(); ++i) {
        const Run& r = runs[i];
        std::fprintf(f,
                     "%s\n {\"sim_cycles\": %" PRIu64
                     ", \"wall_seconds\": %.6f, \"cpu_seconds\": %.6f, \"regs\": {",
                     i ? "," : "", r.sim_cycles, r.wall_seconds, r.cpu_seconds);
        for (size_t k = 0; k < r.regs.size(); ++k)
            std::fprintf(f, "%s\"%s\": %" PRIu64, k ? ", " : "", r.regs[k].first.c_str(),
                         r.regs[k].second);
        std::fprintf(f, "}}");
    }
    std::fprintf(f, "\n]}\n");
    std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 4) fail("usage: SCRIPT PROGRESS RESULTS [+verilator+...]");
    auto ctx = std::make_unique<VerilatedContext>();
    ctx->commandArgs(argc - 3, argv + 3);
    Harness h(ctx.get(), argv[2]);
    std::ifstream script(argv[1]);
    if (!script) fail(std::string("cannot read ") + argv[1]);

    std::vector<Run> runs;
    uint64_t start_cycle = 0;
    Clock::time_point start_wall;
    std::clock_t start_cpu = 0;
    std::string line;
    while (std::getline(script, line)) {
        std::istringstream in(line);
        std::string cmd;
        if (!(in >> cmd) || cmd[0] == '#') continue;
        if (cmd == "image") {
            std::string path;
            in >> path;
            std::ifstream f(path, std::ios::binary | std::ios::ate);
            if (!f) fail("cannot read " + path);
            uint64_t size = f.tellg();
            check_range(0, size);
            f.seekg(0);
            f.read(reinterpret_cast<char*>(h.memory()), size);
        } else if (cmd == "reset") {
            uint64_t cycles, settle;
            in >> cycles >> settle;
            h.reset(cycles, settle);
        } else if (cmd == "run") {
            runs.emplace_back();
        } else if (cmd == "fill") {
            uint64_t addr, len;
            unsigned byte;
            in >> addr >> len >> byte;
            check_range(addr, len);
            std::memset(h.memory() + addr, int(byte), len);
        } else if (cmd == "write") {
            uint32_t offset;
            uint64_t value;
            in >> offset >> value;
            h.write(offset, uint32_t(value));
        } else if (cmd == "start") {
            uint32_t offset;
            in >> offset;
            start_cycle = h.cycles();
            start_wall = Clock::now();
            start_cpu = std::clock();
            h.write(offset, 1);
        } else if (cmd == "wait") {
            uint32_t offset, mask, progress_offset;
            uint64_t poll, max_cycles;
            in >> offset >> mask >> poll >> max_cycles >> progress_offset;
            auto last = Clock::now();
            while (!(h.read(offset) & mask)) {
                uint64_t elapsed = h.cycles() - start_cycle;
                if (elapsed >= max_cycles)
                    fail("no DONE after " + std::to_string(elapsed) + " cycles");
                h.ticks(poll);
                auto now = Clock::now();
                if (now - last >= std::chrono::milliseconds(250)) {
                    last = now;
                    h.progress(h.cycles() - start_cycle, h.read64(progress_offset),
                               std::chrono::duration<double>(now - start_wall).count());
                }
            }
            if (runs.empty()) fail("wait outside a run");
            runs.back().sim_cycles = h.cycles() - start_cycle;
            runs.back().wall_seconds =
                std::chrono::duration<double>(Clock::now() - start_wall).count();
            runs.back().cpu_seconds = double(std::clock() - start_cpu) / CLOCKS_PER_SEC;
        } else if (cmd == "read32" || cmd == "read64") {
            std::string name;
            uint32_t offset;
            in >> name >> offset;
            if (runs.empty()) fail(cmd + " outside a run");
            runs.back().regs.emplace_back(name, cmd == "read32" ? h.read(offset) : h.read64(offset));
        } else if (cmd == "dump") {
            uint64_t addr, len;
            std::string path;
            in >> addr >> len >> path;
            check_range(addr, len);
            std::ofstream f(path, std::ios::binary);
            f.write(reinterpret_cast<const char*>(h.memory() + addr), len);
            if (!f) fail("cannot write " + path);
        } else {
            fail("unknown script command: " + line);
        }
        if (in.fail()) fail("bad script line: " + line);
    }
    write_results(argv[3], runs);
    return 0;
}
