# ordo - build, test, check, bench.
#   make            build/libordo.so, build/libordo.a
#   make demo       the main job: examples/linear_regression.lua
#   make test       native tests (spec/native) and Lua specs, one summary line
#   make check      native tests again under ThreadSanitizer, then ASan+UBSan
#   make valgrind   native tests under valgrind's leak checker
#   make bench      benchmarks, peers side by side
# CUDA=auto|0|1     build the CUDA backend when nvcc is found (auto), never, or always

CC       ?= cc
OPT      ?= -O2
CFLAGS   ?= $(OPT) -g
WARN     := -Wall -Wextra -Werror
STD      := -std=c11 -D_GNU_SOURCE
BUILD    ?= build
SANFLAGS ?=
CUDA     ?= auto
NVCC     ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)

ifeq ($(CUDA),auto)
  ifneq ($(NVCC),)
    WITH_CUDA := 1
  endif
else ifeq ($(CUDA),1)
  WITH_CUDA := 1
  ifeq ($(NVCC),)
    $(error CUDA=1 but nvcc was not found)
  endif
endif

ALL_CFLAGS := $(STD) $(WARN) $(CFLAGS) $(SANFLAGS) -fPIC -pthread -Isrc
LDLIBS     := -lopenblas -pthread -lm

LIB_SRC := $(wildcard src/*.c) $(wildcard kernels/cpu/*.c)
LIB_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRC))

ifdef WITH_CUDA
  CUDA_HOME  := $(patsubst %/bin/nvcc,%,$(NVCC))
  CU_SRC     := $(wildcard src/cuda/*.cu) $(wildcard kernels/cuda/*.cu)
  LIB_OBJ    += $(patsubst %.cu,$(BUILD)/obj/%.o,$(CU_SRC))
  ALL_CFLAGS += -DORDO_WITH_CUDA -I$(CUDA_HOME)/include
  LDLIBS     += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart
  NVFLAGS    := -O2 -Xcompiler -fPIC -Isrc -DORDO_WITH_CUDA \
                -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
endif

TEST_SRC := $(wildcard spec/native/test_*.c)
TEST_BIN := $(patsubst spec/native/%.c,$(BUILD)/tests/%,$(TEST_SRC))

.PHONY: all demo deps test test-native check check-tsan check-asan valgrind bench clean
all: $(BUILD)/libordo.so $(BUILD)/libordo.a

# Objects depend on the flags they were built with, so switching CUDA=0/1 or
# sanitizers never links stale objects.
FLAGS_STAMP := $(BUILD)/.flags
$(shell mkdir -p $(BUILD); echo '$(ALL_CFLAGS) $(NVFLAGS)' | cmp -s - $(FLAGS_STAMP) || echo '$(ALL_CFLAGS) $(NVFLAGS)' > $(FLAGS_STAMP))

$(BUILD)/obj/%.o: %.c $(wildcard src/*.h kernels/cpu/*.h) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/obj/%.o: %.cu $(wildcard src/*.h) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@

$(BUILD)/libordo.so: $(LIB_OBJ)
	$(CC) -shared $(SANFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/libordo.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

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
	@cd build && LUA_PATH="../lua/?.lua;../lua/?/init.lua;;" luajit ../examples/linear_regression.lua

test: deps
	@$(MAKE) --no-print-directory all $(TEST_BIN)
	@bash spec/run_tests.sh $(BUILD)/tests

# Sanitizer builds go to their own folders so they never mix with the release build.
check: check-tsan check-asan
check-tsan:
	$(MAKE) BUILD=build/tsan OPT=-O1 SANFLAGS=-fsanitize=thread CUDA=0 test-native
# The host block cache is off under ASan and valgrind: reused blocks would
# hide a use after free.
check-asan:
	ORDO_HOST_CACHE_MB=0 $(MAKE) BUILD=build/asan OPT=-O1 SANFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" CUDA=0 test-native

valgrind: $(TEST_BIN)
	@ORDO_HOST_CACHE_MB=0 bash spec/run_tests.sh --native --valgrind $(BUILD)/tests

bench:
	@bash scripts/deps.sh bench
	@$(MAKE) --no-print-directory all
	@$(MAKE) -s -C bench BUILD=$(abspath $(BUILD))
	@bash bench/run.sh $(abspath $(BUILD))
	@LUA_PATH="lua/?.lua;lua/?/init.lua;;" luajit bench/tensor_bench.lua

clean:
	rm -rf build
