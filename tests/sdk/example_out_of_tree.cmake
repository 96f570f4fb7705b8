# Installs the SDK to a temporary prefix, builds the examples it ships
# (share/grpo_sdk/examples: length_reward, c_reward, repeat_sampler, hint_handler) against
# it alone, and uses each: score, plugins --check, a training step.
set(work ${BINARY_DIR}/tests/example_out_of_tree)
file(REMOVE_RECURSE ${work})
file(MAKE_DIRECTORY ${work})

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${BINARY_DIR} --component sdk --prefix ${work}/prefix)
run(${CMAKE_COMMAND} -S ${work}/prefix/share/grpo_sdk/examples/length_reward -B ${work}/build -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${work}/prefix -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${work}/build)

file(WRITE ${work}/rows.jsonl "{\"prompt\": \"write a lot\"}\n{\"prompt\": \"write a little\"}\n")
string(REPEAT "long " 300 long_text)
file(WRITE ${work}/c.jsonl "{\"completion\": \"${long_text}\"}\n{\"completion\": \"short\"}\n")
run(${HOST} score --plugins ${work}/build/liblength_reward.so --reward_funcs length_reward
    --dataset ${work}/rows.jsonl --completions ${work}/c.jsonl --output ${work}/rewards.jsonl)
file(STRINGS ${work}/rewards.jsonl lines)
list(GET lines 0 first)
list(GET lines 1 second)
if(NOT first MATCHES "\"length_reward\":1.0" OR NOT second MATCHES "\"length_reward\":0.0")
  message(FATAL_ERROR "unexpected rewards:\n${first}\n${second}")
endif()
message(STATUS "out-of-tree length_reward built against the installed SDK and scored: ${first}")

# The C reward, its option read through the host's typed getters.
run(${CMAKE_COMMAND} -S ${work}/prefix/share/grpo_sdk/examples/c_reward -B ${work}/c_build -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${work}/prefix -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${work}/c_build)
file(WRITE ${work}/c2.jsonl "{\"completion\": \"the answer is 4\"}\n{\"completion\": \"no idea\"}\n")
run(${HOST} score --plugins ${work}/c_build/libc_reward.so --reward_funcs keyword_reward
    --plugin_args "{\"keyword_reward\": {\"keyword\": \"idea\"}}"
    --dataset ${work}/rows.jsonl --completions ${work}/c2.jsonl --output ${work}/c_rewards.jsonl)
file(STRINGS ${work}/c_rewards.jsonl lines)
list(GET lines 0 first)
list(GET lines 1 second)
if(NOT first MATCHES "\"keyword_reward\":0.0" OR NOT second MATCHES "\"keyword_reward\":1.0")
  message(FATAL_ERROR "unexpected rewards of the C example:\n${first}\n${second}")
endif()
run(${HOST} plugins --check ${work}/c_build/libc_reward.so)

# The sampler, trained against for one step.
run(${CMAKE_COMMAND} -S ${work}/prefix/share/grpo_sdk/examples/repeat_sampler -B ${work}/s_build -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${work}/prefix -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${work}/s_build)
run(${HOST} init-model --arch qwen2 --preset tiny --out ${work}/model --seed 1)
run(${HOST} train --model ${work}/model --dataset ${work}/rows.jsonl --train_type full --reward_funcs format
    --plugins ${work}/s_build/librepeat_sampler.so --sampler repeat_sampler --sampler_args "{\"repeat\": 2}"
    --num_generations 2 --per_device_train_batch_size 2 --max_steps 1 --max_completion_length 8
    --log_completions true --report_to none --output_dir ${work}/out)
file(STRINGS ${work}/out/completions.jsonl lines)
list(GET lines 0 first)
if(NOT first MATCHES "\"completion_tokens\":2")
  message(FATAL_ERROR "unexpected completion of the example sampler:\n${first}")
endif()
message(STATUS "out-of-tree c_reward and repeat_sampler built against the installed SDK and used")

# The multi-turn handler: a training step whose conversations get its follow-up.
run(${CMAKE_COMMAND} -S ${work}/prefix/share/grpo_sdk/examples/hint_handler -B ${work}/h_build -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${work}/prefix -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${work}/h_build)
run(${HOST} train --model ${work}/model --dataset ${work}/rows.jsonl --train_type full --reward_funcs format
    --plugins ${work}/s_build/librepeat_sampler.so ${work}/h_build/libhint.so --sampler repeat_sampler
    --sampler_args "{\"repeat\": 2}" --multi_turn_scheduler hint --max_turns 3
    --num_generations 2 --per_device_train_batch_size 2 --max_steps 1 --max_completion_length 8
    --log_completions true --report_to none --output_dir ${work}/h_out)
file(STRINGS ${work}/h_out/completions.jsonl lines)
list(GET lines 0 first)
if(NOT first MATCHES "\"turns\":2" OR NOT first MATCHES "Are you sure\\? Check it once more.")
  message(FATAL_ERROR "unexpected conversation with the example handler:\n${first}")
endif()
message(STATUS "out-of-tree hint handler built against the installed SDK and used")
