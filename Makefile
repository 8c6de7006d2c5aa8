# ordo - build, test, check, bench.
#   make            build/libordo.so, build/libordo.a, build/ordo (the launcher/REPL)
#   make demo       the main job: examples/fashion_mlp.lua (trains an MLP on Fashion-MNIST)
#   make test       native tests (spec/native), Lua specs, and the GPU specs on the
#                   simulated device and on the CUDA emulation; one summary line
#   make check      native tests again under ThreadSanitizer, then ASan+UBSan (native,
#                   Lua specs, and the GPU specs on the CUDA emulation), then the GPU
#                   specs on the CUDA emulation under ThreadSanitizer
#   make valgrind   native tests under valgrind's leak checker
#   make bench      benchmarks, peers side by side
#   make install    PREFIX=/usr/local (and DESTDIR): bin/ordo, lib/, include/, share/ordo/lua/
#   make test-cuda-emu  the GPU specs with the CUDA kernels compiled for the host (kernels/cuda/emu)
# CUDA=auto|0|1     build the CUDA backend when nvcc is found (auto), never, or always
# CUDA=emu          the CUDA kernels as host C++ on the simulated device, no toolkit needed

CC       ?= cc
OPT      ?= -O2
CFLAGS   ?= $(OPT) -g
WARN     := -Wall -Wextra -Werror
STD      := -std=c11 -D_GNU_SOURCE
# the CUDA emulation builds beside the release library, never over it
ifeq ($(CUDA),emu)
  BUILD  ?= build/emu
endif
BUILD    ?= build
PREFIX   ?= /usr/local
VERSION  := 0.1.0
SANFLAGS ?=
CUDA     ?= auto
NVCC     ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)

ifeq ($(CUDA),auto)
  ifneq ($(NVCC),)
    WITH_CUDA := 1
  endif
else ifeq ($(CUDA),emu)
  WITH_CUDA_EMU := 1
else ifeq ($(CUDA),1)
  WITH_CUDA := 1
  ifeq ($(NVCC),)
    $(error CUDA=1 but nvcc was not found)
  endif
endif

# PREFETCHW for __builtin_prefetch(p, 1) on x86-64 (a NOP on the CPUs that
# lack it): the engine prefetches, for writing, blocks that another core
# wrote last (src/tensor_push.c, src/bulk.c); prefetcht0 would fetch them
# shared, and the write would still wait for the other core.
ARCH_CFLAGS := $(if $(filter x86_64,$(shell uname -m)),-mprfchw)
# -fno-semantic-interposition: no program may replace a function of
# libordo.so with its own (src/libordo.map hides all but the ordo_ API), so
# gcc may inline and call them directly, as it would in an executable.
ALL_CFLAGS := $(STD) $(WARN) $(CFLAGS) $(ARCH_CFLAGS) $(SANFLAGS) -fPIC -fno-semantic-interposition -pthread -Isrc
LDLIBS     := -lopenblas -pthread -lm

LIB_SRC := $(wildcard src/*.c) $(wildcard kernels/cpu/*.c)
LIB_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRC))

ifdef WITH_CUDA
  CUDA_HOME  := $(patsubst %/bin/nvcc,%,$(NVCC))
  CU_SRC     := $(wildcard src/cuda/*.cu) $(wildcard kernels/cuda/*.cu)
  LIB_OBJ    += $(patsubst %.cu,$(BUILD)/obj/%.o,$(CU_SRC)) $(BUILD)/obj/kernels/cuda/error_names.o
  ALL_CFLAGS += -DORDO_WITH_CUDA -I$(CUDA_HOME)/include
  LDLIBS     += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcurand -lcudart -lstdc++
  NVFLAGS    := -O2 -Xcompiler -fPIC -Xcompiler -Wall -Isrc -Ikernels/cuda -DORDO_WITH_CUDA \
                -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
endif

# The CUDA emulation (kernels/cuda/emu/README.md): the kernels' sources with
# their launches rewritten, compiled as host C++ against the emulation's
# headers, and its runtime; GPU contexts must be simulated ones
# (ORDO_SIMULATED_GPUS=n), whose streams run the emulated grids.
ifdef WITH_CUDA_EMU
  CXX        ?= g++
  EMU_SRC    := $(BUILD)/emu_src
  EMU_CU     := $(notdir $(wildcard kernels/cuda/*.cu))
  EMU_CUH    := $(patsubst kernels/cuda/%,$(EMU_SRC)/%,$(wildcard kernels/cuda/*.cuh))
  LIB_OBJ    += $(patsubst %.cu,$(BUILD)/obj/emu/%.o,$(EMU_CU)) $(BUILD)/obj/emu/emu_runtime.o \
                $(BUILD)/obj/kernels/cuda/error_names.o
  ALL_CFLAGS += -DORDO_CUDA_EMU
  LDLIBS     += -lstdc++
  EMU_FLAGS  := -std=c++17 -D_GNU_SOURCE $(OPT) -g $(SANFLAGS) -fPIC -pthread -ffp-contract=off $(WARN) \
                -Wno-unknown-pragmas -DORDO_CUDA_EMU -Ikernels/cuda/emu/include -iquote kernels/cuda -Isrc
endif

# The launcher (src/launcher/) is a program of its own, kept out of the
# library: it embeds LuaJIT and readline, and the Lua package it runs loads
# libordo.so through the FFI, so it does not link the library.
LUAJIT_CFLAGS := $(shell pkg-config --cflags luajit 2>/dev/null || echo -I/usr/include/luajit-2.1)
LUAJIT_LIBS   := $(shell pkg-config --libs luajit 2>/dev/null || echo -lluajit-5.1)
LAUNCHER_SRC  := $(wildcard src/launcher/*.c)
LAUNCHER_OBJ  := $(patsubst %.c,$(BUILD)/obj/%.o,$(LAUNCHER_SRC))

TEST_SRC := $(wildcard spec/native/test_*.c)
TEST_BIN := $(patsubst spec/native/%.c,$(BUILD)/tests/%,$(TEST_SRC))

.PHONY: all demo deps test test-native test-cuda-emu check check-tsan check-asan check-lua-asan check-cuda-emu check-cuda-emu-tsan valgrind valgrind-run bench install uninstall clean
all: $(BUILD)/libordo.so $(BUILD)/libordo.a $(BUILD)/ordo

# Objects depend on the flags they were built with, so switching CUDA=0/1 or
# sanitizers never links stale objects.
FLAGS_STAMP := $(BUILD)/.flags
$(shell mkdir -p $(BUILD); echo '$(ALL_CFLAGS) $(NVFLAGS) $(EMU_FLAGS)' | cmp -s - $(FLAGS_STAMP) || echo '$(ALL_CFLAGS) $(NVFLAGS) $(EMU_FLAGS)' > $(FLAGS_STAMP))

# Kernels: math functions need not set errno (nothing reads it), which lets
# gcc vectorise sqrtf and friends at -O2.
$(BUILD)/obj/kernels/%.o: ALL_CFLAGS += -fno-math-errno

$(BUILD)/obj/%.o: %.c $(wildcard src/*.h kernels/cpu/*.h) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/obj/%.o: %.cu $(wildcard src/*.h kernels/cpu/*.h kernels/cuda/*.cuh) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@

$(EMU_SRC)/%: kernels/cuda/% kernels/cuda/emu/rewrite_launches.lua
	@mkdir -p $(dir $@)
	luajit kernels/cuda/emu/rewrite_launches.lua $< $@

$(BUILD)/obj/emu/%.o: $(EMU_SRC)/%.cu $(EMU_CUH) $(wildcard src/*.h kernels/cpu/*.h kernels/cuda/emu/include/*.h) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_FLAGS) -x c++ -c $< -o $@

$(BUILD)/obj/emu/emu_runtime.o: kernels/cuda/emu/emu_runtime.cpp $(wildcard src/*.h kernels/cpu/*.h kernels/cuda/*.cuh kernels/cuda/emu/include/*.h) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_FLAGS) -c $< -o $@

$(BUILD)/libordo.so: $(LIB_OBJ) src/libordo.map
	$(CC) -shared $(SANFLAGS) -Wl,--version-script=src/libordo.map -o $@ $(LIB_OBJ) $(LDLIBS)

$(BUILD)/libordo.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

# (a more specific pattern than $(BUILD)/obj/%.o, so make picks this one)
$(BUILD)/obj/src/launcher/%.o: src/launcher/%.c src/launcher/launcher.h src/ordo.h $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LUAJIT_CFLAGS) -DORDO_VERSION='"$(VERSION)"' -c $< -o $@

$(BUILD)/ordo: $(LAUNCHER_OBJ)
	$(CC) $(SANFLAGS) -o $@ $^ $(LUAJIT_LIBS) -lreadline -pthread -lm

$(BUILD)/tests/%: spec/native/%.c $(wildcard spec/native/*.h) $(BUILD)/libordo.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Ispec/native $< -o $@ $(BUILD)/libordo.a $(LDLIBS)

test-native: $(TEST_BIN)
	@bash spec/run_tests.sh --native $(BUILD)/tests

deps:
	@bash scripts/deps.sh

# The main job: a real model fitted on the engine from Lua (see examples/).
demo: deps
	@$(MAKE) --no-print-directory all
	@$(BUILD)/ordo examples/fashion_mlp.lua $(DEMO_ARGS)

test: deps
	@$(MAKE) --no-print-directory all $(TEST_BIN)
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/emu CUDA=emu $(BUILD)/emu/libordo.so
	@bash spec/run_tests.sh --cuda-emu $(BUILD)/emu $(BUILD)/tests

# Sanitizer builds go to their own folders so they never mix with the release build.
check: check-tsan check-asan check-lua-asan check-cuda-emu check-cuda-emu-tsan
check-tsan:
	$(MAKE) BUILD=build/tsan OPT=-O1 SANFLAGS=-fsanitize=thread CUDA=0 test-native
# The host block cache is off under ASan and valgrind: reused blocks would
# hide a use after free.
check-asan:
	ORDO_HOST_CACHE_MB=0 $(MAKE) BUILD=build/asan OPT=-O1 SANFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" CUDA=0 test-native

# The GPU specs on an ASan+UBSan build of the CUDA emulation: the CUDA
# kernels' host and device code, checked for overflows (past a tensor's
# end too: the allocator poisons the rest of its block under ASan) and
# undefined behaviour, with each block's threads in shuffled order.
check-cuda-emu:
	ORDO_HOST_CACHE_MB=0 $(MAKE) BUILD=build/emu-asan OPT=-O1 SANFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" CUDA=emu build/emu-asan/libordo.so
	@bash spec/run_tests.sh --lua-asan --cuda-emu build/emu-asan

# The GPU specs on a ThreadSanitizer build of the CUDA emulation: each GPU
# thread is a TSan fiber, so TSan reports races between the threads of a
# block that a missing __syncthreads leaves (kernels/cuda/emu/README.md).
check-cuda-emu-tsan:
	$(MAKE) BUILD=build/emu-tsan OPT=-O1 SANFLAGS=-fsanitize=thread CUDA=emu build/emu-tsan/libordo.so build/emu-tsan/no_dlclose.so
	@bash spec/run_tests.sh --lua-tsan --cuda-emu build/emu-tsan

$(BUILD)/no_dlclose.so: spec/support/no_dlclose.c
	@mkdir -p $(@D)
	$(CC) -shared -fPIC -o $@ $<

# The Lua specs on an ASan+UBSan build of the library (the tensor layer and
# kernels as Lua drives them; the odd-arguments spec's child runs on it too).
check-lua-asan:
	ORDO_HOST_CACHE_MB=0 $(MAKE) BUILD=build/asan OPT=-O1 SANFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" CUDA=0 all
	@bash spec/run_tests.sh --lua-asan build/asan

# Without CUDA, like the sanitizer builds: the CUDA runtime's own start-up
# (dlopen of the driver) trips valgrind, and the GPU scheduling is tested
# on the simulated device, which needs no CUDA.
valgrind:
	@$(MAKE) --no-print-directory BUILD=build/valgrind CUDA=0 valgrind-run
valgrind-run: $(TEST_BIN)
	@ORDO_HOST_CACHE_MB=0 bash spec/run_tests.sh --native --valgrind $(BUILD)/tests

# The GPU specs once more, on the CUDA kernels themselves run by the
# emulation (kernels/cuda/emu/README.md): their host code, launches and
# device code, on the simulated device, with each block's threads in
# forward and then in reverse order.
test-cuda-emu: deps
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/emu CUDA=emu $(BUILD)/emu/libordo.so
	@bash spec/run_tests.sh --cuda-emu $(BUILD)/emu

bench:
	@bash scripts/deps.sh bench
	@$(MAKE) --no-print-directory all
	@$(MAKE) -s -C bench BUILD=$(abspath $(BUILD))
	@bash bench/run.sh $(abspath $(BUILD))
	@LUA_PATH="lua/?.lua;lua/?/init.lua;;" luajit bench/tensor_bench.lua
	@ORDO_BUILD=$(abspath $(BUILD)) ORDO_LIB=$(abspath $(BUILD))/libordo.so luajit bench/train_bench.lua

# The launcher finds ../share/ordo/lua and ../lib/libordo.so from bin/.
DEST := $(abspath $(DESTDIR)$(PREFIX))
install: all
	install -d $(DEST)/bin $(DEST)/lib $(DEST)/include $(DEST)/share/ordo/lua
	install -m 755 $(BUILD)/ordo $(DEST)/bin/ordo
	install -m 755 $(BUILD)/libordo.so $(DEST)/lib/libordo.so
	install -m 644 $(BUILD)/libordo.a $(DEST)/lib/libordo.a
	install -m 644 src/ordo.h src/ordo_kernel.h src/ordo_tensor.h src/ordo_shell.h $(DEST)/include/
	cd lua && find ordo -name '*.lua' -exec install -D -m 644 {} $(DEST)/share/ordo/lua/{} \;

uninstall:
	rm -f $(DEST)/bin/ordo $(DEST)/lib/libordo.so $(DEST)/lib/libordo.a
	rm -f $(DEST)/include/ordo.h $(DEST)/include/ordo_kernel.h $(DEST)/include/ordo_tensor.h $(DEST)/include/ordo_shell.h
	rm -rf $(DEST)/share/ordo

clean:
	rm -rf build
