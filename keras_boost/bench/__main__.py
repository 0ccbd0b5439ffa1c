from keras_boost.bench.cli import main

main()
