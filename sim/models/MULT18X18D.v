// Behavioural model of the ECP5 MULT18X18D, for simulation only (Verilator, Icarus).
//
// It models the subset AttenIO instantiates (attenio.hdl.formats.dsp) and Yosys's own
// ECP5 mapping emits (techlibs/lattice/dsp_map_18x18.v): P = A * B, A and B signed
// (SIGNEDA, SIGNEDB high) or unsigned 18-bit operands, P their 36-bit product; an
// optional input register on A and B and an optional output register on P, each on
// CLK0, enabled by CE0 and reset to 0 by RST0 synchronously (reset before enable).
// Registers start at 0, as the design's own registers do. SOURCEA/SOURCEB must be 0
// (operands from A and B, no shift chain); C, the cascade ports and CLK1..3, CE1..3,
// RST1..3 are ignored. Any other parameter value (a pipeline register, another clock,
// CE or reset, asynchronous reset, bypass) stops elaboration: an unmodelled mode is
// refused, never simulated wrongly.
`default_nettype none
module MULT18X18D (
    input wire A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17,
    input wire B0, B1, B2, B3, B4, B5, B6, B7, B8, B9, B10, B11, B12, B13, B14, B15, B16, B17,
    input wire C0, C1, C2, C3, C4, C5, C6, C7, C8, C9, C10, C11, C12, C13, C14, C15, C16, C17,
    input wire SIGNEDA, SIGNEDB, SOURCEA, SOURCEB,
    input wire CLK0, CLK1, CLK2, CLK3,
    input wire CE0, CE1, CE2, CE3,
    input wire RST0, RST1, RST2, RST3,
    input wire SRIA0, SRIA1, SRIA2, SRIA3, SRIA4, SRIA5, SRIA6, SRIA7, SRIA8, SRIA9,
    input wire SRIA10, SRIA11, SRIA12, SRIA13, SRIA14, SRIA15, SRIA16, SRIA17,
    input wire SRIB0, SRIB1, SRIB2, SRIB3, SRIB4, SRIB5, SRIB6, SRIB7, SRIB8, SRIB9,
    input wire SRIB10, SRIB11, SRIB12, SRIB13, SRIB14, SRIB15, SRIB16, SRIB17,
    output wire SROA0, SROA1, SROA2, SROA3, SROA4, SROA5, SROA6, SROA7, SROA8, SROA9,
    output wire SROA10, SROA11, SROA12, SROA13, SROA14, SROA15, SROA16, SROA17,
    output wire SROB0, SROB1, SROB2, SROB3, SROB4, SROB5, SROB6, SROB7, SROB8, SROB9,
    output wire SROB10, SROB11, SROB12, SROB13, SROB14, SROB15, SROB16, SROB17,
    output wire ROA0, ROA1, ROA2, ROA3, ROA4, ROA5, ROA6, ROA7, ROA8, ROA9,
    output wire ROA10, ROA11, ROA12, ROA13, ROA14, ROA15, ROA16, ROA17,
    output wire ROB0, ROB1, ROB2, ROB3, ROB4, ROB5, ROB6, ROB7, ROB8, ROB9,
    output wire ROB10, ROB11, ROB12, ROB13, ROB14, ROB15, ROB16, ROB17,
    output wire ROC0, ROC1, ROC2, ROC3, ROC4, ROC5, ROC6, ROC7, ROC8, ROC9,
    output wire ROC10, ROC11, ROC12, ROC13, ROC14, ROC15, ROC16, ROC17,
    output wire P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, P10, P11, P12, P13, P14, P15, P16, P17,
    output wire P18, P19, P20, P21, P22, P23, P24, P25, P26, P27, P28, P29, P30, P31, P32,
    output wire P33, P34, P35,
    output wire SIGNEDP
);
    parameter REG_INPUTA_CLK = "NONE";
    parameter REG_INPUTA_CE = "CE0";
    parameter REG_INPUTA_RST = "RST0";
    parameter REG_INPUTB_CLK = "NONE";
    parameter REG_INPUTB_CE = "CE0";
    parameter REG_INPUTB_RST = "RST0";
    parameter REG_INPUTC_CLK = "NONE";
    parameter REG_INPUTC_CE = "CE0";
    parameter REG_INPUTC_RST = "RST0";
    parameter REG_PIPELINE_CLK = "NONE";
    parameter REG_PIPELINE_CE = "CE0";
    parameter REG_PIPELINE_RST = "RST0";
    parameter REG_OUTPUT_CLK = "NONE";
    parameter REG_OUTPUT_CE = "CE0";
    parameter REG_OUTPUT_RST = "RST0";
    parameter CLK0_DIV = "ENABLED";
    parameter CLK1_DIV = "ENABLED";
    parameter CLK2_DIV = "ENABLED";
    parameter CLK3_DIV = "ENABLED";
    parameter HIGHSPEED_CLK = "NONE";
    parameter GSR = "ENABLED";
    parameter CAS_MATCH_REG = "FALSE";
    parameter SOURCEB_MODE = "B_SHIFT";
    parameter MULT_BYPASS = "DISABLED";
    parameter RESETMODE = "SYNC";

    localparam REG_A = REG_INPUTA_CLK == "CLK0";
    localparam REG_B = REG_INPUTB_CLK == "CLK0";
    localparam REG_P = REG_OUTPUT_CLK == "CLK0";

    // Elaboration fails on an unmodelled mode: the module named below does not exist.
    generate
        if (!(REG_INPUTA_CLK == "NONE" || REG_A) || !(REG_INPUTB_CLK == "NONE" || REG_B)
                || !(REG_OUTPUT_CLK == "NONE" || REG_P)
                || REG_INPUTC_CLK != "NONE" || REG_PIPELINE_CLK != "NONE"
                || REG_INPUTA_CE != "CE0" || REG_INPUTB_CE != "CE0" || REG_OUTPUT_CE != "CE0"
                || REG_INPUTA_RST != "RST0" || REG_INPUTB_RST != "RST0"
                || REG_OUTPUT_RST != "RST0" || RESETMODE != "SYNC"
                || MULT_BYPASS != "DISABLED" || CAS_MATCH_REG != "FALSE"
                || HIGHSPEED_CLK != "NONE" || CLK0_DIV != "ENABLED")
            MULT18X18D_UNMODELLED_PARAMETER_VALUE unmodelled();
    endgenerate

    wire [17:0] a = {A17, A16, A15, A14, A13, A12, A11, A10, A9, A8, A7, A6, A5, A4, A3, A2,
                     A1, A0};
    wire [17:0] b = {B17, B16, B15, B14, B13, B12, B11, B10, B9, B8, B7, B6, B5, B4, B3, B2,
                     B1, B0};

    reg [17:0] a_r = 18'd0;
    reg [17:0] b_r = 18'd0;
    reg sa_r = 1'b0;
    reg sb_r = 1'b0;
    always @(posedge CLK0) begin
        if (RST0) begin
            a_r <= 18'd0;
            b_r <= 18'd0;
            sa_r <= 1'b0;
            sb_r <= 1'b0;
        end else if (CE0) begin
            a_r <= a;
            b_r <= b;
            sa_r <= SIGNEDA;
            sb_r <= SIGNEDB;
        end
    end

    wire [17:0] a_m = REG_A ? a_r : a;
    wire [17:0] b_m = REG_B ? b_r : b;
    wire sa_m = REG_A ? sa_r : SIGNEDA;
    wire sb_m = REG_B ? sb_r : SIGNEDB;
    wire signed [36:0] a_x = {{19{sa_m & a_m[17]}}, a_m};
    wire signed [36:0] b_x = {{19{sb_m & b_m[17]}}, b_m};
    wire signed [36:0] product = a_x * b_x;

    reg [35:0] p_r = 36'd0;
    always @(posedge CLK0) begin
        if (RST0)
            p_r <= 36'd0;
        else if (CE0)
            p_r <= product[35:0];
    end

    wire [35:0] p = REG_P ? p_r : product[35:0];
    assign {P35, P34, P33, P32, P31, P30, P29, P28, P27, P26, P25, P24, P23, P22, P21, P20, P19,
            P18, P17, P16, P15, P14, P13, P12, P11, P10, P9, P8, P7, P6, P5, P4, P3, P2, P1,
            P0} = p;
    assign SIGNEDP = sa_m | sb_m;
    assign {SROA17, SROA16, SROA15, SROA14, SROA13, SROA12, SROA11, SROA10, SROA9, SROA8,
            SROA7, SROA6, SROA5, SROA4, SROA3, SROA2, SROA1, SROA0} = 18'd0;
    assign {SROB17, SROB16, SROB15, SROB14, SROB13, SROB12, SROB11, SROB10, SROB9, SROB8,
            SROB7, SROB6, SROB5, SROB4, SROB3, SROB2, SROB1, SROB0} = 18'd0;
    assign {ROA17, ROA16, ROA15, ROA14, ROA13, ROA12, ROA11, ROA10, ROA9, ROA8, ROA7, ROA6,
            ROA5, ROA4, ROA3, ROA2, ROA1, ROA0} = a_m;
    assign {ROB17, ROB16, ROB15, ROB14, ROB13, ROB12, ROB11, ROB10, ROB9, ROB8, ROB7, ROB6,
            ROB5, ROB4, ROB3, ROB2, ROB1, ROB0} = b_m;
    assign {ROC17, ROC16, ROC15, ROC14, ROC13, ROC12, ROC11, ROC10, ROC9, ROC8, ROC7, ROC6,
            ROC5, ROC4, ROC3, ROC2, ROC1, ROC0} = 18'd0;
endmodule
`default_nettype wire
