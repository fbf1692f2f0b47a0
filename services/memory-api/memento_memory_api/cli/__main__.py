from memento_memory_api.cli import main

main()
