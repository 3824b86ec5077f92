from analysis.cli import main

main()
