# Installs the SDK to a temporary prefix, builds sdk/examples/length_reward
# against it alone, and loads the result with `grpo-host score --plugins`.
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
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/sdk/examples/length_reward -B ${work}/build -G ${GENERATOR}
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
