"""The trusted side's hands: reads submitted files, starts and kills children, talks to them."""
